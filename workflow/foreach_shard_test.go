package workflow_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// shardStores are the stores a map's shards are tested on: DynamoDB
// Local, the embedded store, and DynamoDB behind a proxy that throttles,
// answers 500 (some after applying the write) and lags its indexes.
func shardStores(t *testing.T) map[string]state.Store {
	t.Helper()
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	if _, err := lite.Install(testbin.Context(t), false); err != nil {
		t.Fatal(err)
	}
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
	prefix := dynamotest.Prefix(t)
	clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	if _, err := clean.Install(testbin.Context(t), false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	p.SetFaults(dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.5})
	return map[string]state.Store{
		"dynamodb": dynamotest.NewStore(t, dynamodb.Options{}),
		"sqlite":   lite,
		"faulty":   dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}),
	}
}

// persist retries what a faulty store refused, as a participant would
// (each call here is repeatable), for at most a minute.
func persist(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// finishElement takes an element from READY through RUNNING to its end,
// going on from wherever a lost answer left it.
func finishElement(ctx context.Context, st state.Store, k state.ActivityKey, to state.ActivityState) (*state.ActivityExec, error) {
	for try := 0; try < 100; try++ {
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			continue
		}
		switch a.State {
		case state.Ready:
			_, err = st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}})
		case state.Running:
			_, err = st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to, Owner: "o"})
		default:
			return a, nil
		}
		_ = err // a refused or lost move is read back on the next try
	}
	return nil, fmt.Errorf("element %s did not reach %s", k.ActivityExecID, to)
}

// shardTotals reads the shards of the map's elements and sums them.
func shardTotals(t *testing.T, st state.Store, id, name string, items int) (counted, completed, failed int) {
	t.Helper()
	for k := 0; k < min(items, state.MapShards); k++ {
		var a *state.ActivityExec
		persist(t, "read a shard", func() (err error) {
			a, err = st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, name, k), WorkflowExecID: id})
			return err
		})
		sh, err := state.ParseMapShard(a.MapShard)
		if err != nil {
			t.Fatalf("shard %d: %v", k, err)
		}
		for i := k; i < items; i += state.MapShards {
			if sh.Has(i) {
				counted++
			}
		}
		if sh.Counted() != countedBits(sh, k, items) {
			t.Errorf("shard %d counts %d elements but marks %d", k, sh.Counted(), countedBits(sh, k, items))
		}
		completed += sh.Completed
		failed += sh.Failed
	}
	return counted, completed, failed
}

func countedBits(sh *state.MapShard, k, items int) int {
	n := 0
	for i := k; i < items; i += state.MapShards {
		if sh.Has(i) {
			n++
		}
	}
	return n
}

// TestConcurrentElementEndsCountOnce: 64 goroutines end the elements of a
// map of 320 at once, each element's advance made twice (by two
// goroutines, racing), a few elements' not at all (their wrapper died
// between its end and its count). The shards count every advanced element
// exactly once; the map, missing the dead ones' counts, waits; one step
// (the monitor's) counts them and ends the map with the exact counts; and
// advancing an element again afterwards counts nothing more. On DynamoDB,
// the embedded store, and DynamoDB behind faults.
func TestConcurrentElementEndsCountOnce(t *testing.T) {
	t.Parallel()
	const n, tolerated = 320, 40
	fails := func(i int) bool { return i%8 == 3 } // 40 of 320
	dead := map[int]bool{5: true, 100: true, 319: true}
	for name, st := range shardStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testbin.Context(t)
			d, err := definition.Parse("shards.yaml", []byte(fmt.Sprintf("name: shards\nactivities:\n  m: {for_each: {count: %d}, tolerated_failures: %d, command: [\"true\"]}\n", n, tolerated)))
			if err != nil {
				t.Fatal(err)
			}
			var id string
			persist(t, "start", func() (err error) {
				id, _, err = workflow.Start(ctx, st, d, workflow.StartOptions{RequestID: "shards::" + name})
				return err
			})
			mapKey := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "m"), WorkflowExecID: id}
			persist(t, "open the map", func() error {
				m, err := st.GetActivity(ctx, mapKey)
				if err == nil {
					_, err = workflow.StepMap(ctx, st, m, true, nil)
				}
				return err
			})
			jobs := make(chan int, 2*n)
			for i := range n {
				jobs <- i
				jobs <- i
			}
			close(jobs)
			var wg sync.WaitGroup
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						to := state.Completed
						if fails(i) {
							to = state.Failed
						}
						a, err := finishElement(ctx, st, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", i), WorkflowExecID: id}, to)
						if err != nil {
							t.Error(err)
							return
						}
						if dead[i] {
							continue
						}
						var last error
						for try := 0; try < 100; try++ {
							if _, last = workflow.Advance(ctx, st, a, nil); last == nil {
								break
							}
						}
						if last != nil {
							t.Errorf("advance after element %d: %v", i, last)
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			counted, completed, failed := shardTotals(t, st, id, "m", n)
			if counted != n-len(dead) || failed != tolerated {
				t.Errorf("the shards count %d elements (%d completed, %d failed), want %d (%d failed)", counted, completed, failed, n-len(dead), tolerated)
			}
			var m *state.ActivityExec
			persist(t, "read the map", func() (err error) { m, err = st.GetActivity(ctx, mapKey); return err })
			if m.State != state.Running {
				t.Fatalf("the map is %s (%s) before the dead elements were counted, want RUNNING", m.State, m.Reason)
			}
			persist(t, "step the map", func() error {
				m, err := st.GetActivity(ctx, mapKey)
				if err == nil {
					_, err = workflow.StepMap(ctx, st, m, false, nil)
				}
				return err
			})
			persist(t, "read the map", func() (err error) { m, err = st.GetActivity(ctx, mapKey); return err })
			want := fmt.Sprintf(`{"items":%d,"completed":%d,"failed":%d}`, n, n-tolerated, tolerated)
			if m.State != state.Completed || m.Output != want {
				t.Fatalf("the map is %s with %s (%s), want COMPLETED with %s", m.State, m.Output, m.Reason, want)
			}
			acc, err := state.ParseMap(m.Map)
			if err != nil || acc.Done != n || acc.Completed != n-tolerated || acc.Failed != tolerated || acc.Cancelled != 0 {
				t.Errorf("the map's account %+v (%v), want every element counted once", acc, err)
			}
			// An advance repeated after the end counts nothing again.
			a, err := finishElement(ctx, st, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 7), WorkflowExecID: id}, state.Completed)
			if err != nil {
				t.Fatal(err)
			}
			persist(t, "advance again", func() error { _, err := workflow.Advance(ctx, st, a, nil); return err })
			if counted, _, failed := shardTotals(t, st, id, "m", n); counted != n || failed != tolerated {
				t.Errorf("after a repeated advance the shards count %d (%d failed), want %d (%d failed)", counted, failed, n, tolerated)
			}
		})
	}
}

// TestHostileShard: a shard's item whose map_shard a stranger overwrote
// with something that is not a shard (markup and a terminal escape) makes
// the advance of an element of that shard fail with an error naming the
// shard, without a panic and without touching the map's account.
func TestHostileShard(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx := testbin.Context(t)
	d, err := definition.Parse("hostile.yaml", []byte("name: hostile\nactivities:\n  m: {for_each: {count: 40}, command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	home := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 1), WorkflowExecID: id}
	hostile := "<script>alert(1)</script>\x1b[2J"
	if _, err := st.UpdateActivity(ctx, home, state.ActivityChange{From: state.ActivityStates, Swap: &state.Swap{Attr: "map_shard", New: hostile}}); err != nil {
		t.Fatal(err)
	}
	mapKey := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "m"), WorkflowExecID: id}
	before, err := st.GetActivity(ctx, mapKey)
	if err != nil {
		t.Fatal(err)
	}
	a, err := finishElement(ctx, st, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 33), WorkflowExecID: id}, state.Completed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = workflow.Advance(ctx, st, a, nil)
	if err == nil || !strings.Contains(err.Error(), "map shard") || !strings.Contains(err.Error(), "element 33") {
		t.Errorf("advance over a hostile shard: %v, want an error naming the shard and the element", err)
	}
	after, err := st.GetActivity(ctx, mapKey)
	if err != nil || after.Map != before.Map || after.State != state.Running {
		t.Errorf("the map after a hostile shard: %+v (%v), want it untouched", after, err)
	}
}
