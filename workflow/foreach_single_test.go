package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// countingStore counts what the steps of one map cost: every read, and
// the writes of the map's account that lost their compare-and-set. With
// failMapRead set, the read of the map that follows a lost write fails.
type countingStore struct {
	state.Store
	mapKey      state.ActivityKey
	reads       atomic.Int64
	mapReads    atomic.Int64 // a step's first read
	lost        atomic.Int64
	failMapRead atomic.Bool
	failNext    atomic.Bool
}

func (c *countingStore) GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	c.reads.Add(1)
	if k == c.mapKey {
		c.mapReads.Add(1)
	}
	if k == c.mapKey && c.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("the store is unreachable")
	}
	return c.Store.GetActivity(ctx, k)
}

func (c *countingStore) UpdateActivity(ctx context.Context, k state.ActivityKey, ch state.ActivityChange) (*state.ActivityExec, error) {
	if k == c.mapKey && ch.Swap != nil && ch.Swap.Attr == "map" && c.failMapRead.CompareAndSwap(true, false) {
		// Another step moved the account first, as far as this one can
		// tell; the read that follows fails.
		c.failNext.Store(true)
		return nil, &state.ConflictError{Kind: "activity", ID: k.ActivityExecID, State: "RUNNING", Want: "the account as it was read"}
	}
	a, err := c.Store.UpdateActivity(ctx, k, ch)
	if k == c.mapKey && errors.Is(err, state.ErrConflict) {
		c.lost.Add(1)
	}
	return a, err
}

// startMap starts a workflow of one for_each map of n `true` elements on
// st, and returns its ID and the key of its map.
func startMap(t *testing.T, st state.Store, n, window int) (string, state.ActivityKey) {
	t.Helper()
	src := fmt.Sprintf("name: single\nactivities:\n  m: {for_each: {count: %d}, max_running: %d, command: [\"true\"]}\n", n, window)
	d, err := definition.Parse("single.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return id, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "m"), WorkflowExecID: id}
}

// TestMapStepsOncePerProcess: 24 goroutines of one process end the
// elements of a map of 320 (a window of 80) as fast as they are written,
// as the wrappers a launcher supervises inline do, and each advances its
// workflow. The steps that many of them judge due at once are taken one
// at a time in the process, so no step loses the account's
// compare-and-set, the reads per element stay far below the map's size,
// and the map ends COMPLETED with every element counted. On the embedded
// store and on DynamoDB Local.
func TestMapStepsOncePerProcess(t *testing.T) {
	t.Parallel()
	const n, window, workers = 192, 48, 16
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	if _, err := lite.Install(testbin.Context(t), false); err != nil {
		t.Fatal(err)
	}
	for name, base := range map[string]state.Store{"sqlite": lite, "dynamodb": dynamotest.NewStore(t, dynamodb.Options{})} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testbin.Context(t)
			id, mapKey := startMap(t, base, n, window)
			st := &countingStore{Store: base, mapKey: mapKey}
			// Elements are handed out as they are written (by a step of an
			// element that ended, once the window has room), by one reader
			// here, so the workers do not queue on the store to look.
			jobs := make(chan int)
			go func() {
				defer close(jobs)
				for i := range n {
					k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", i), WorkflowExecID: id}
					for {
						if _, err := base.GetActivity(ctx, k); err == nil {
							break
						} else if ctx.Err() != nil {
							t.Errorf("element %d was not written: %v", i, err)
							return
						}
						time.Sleep(5 * time.Millisecond)
					}
					select {
					case jobs <- i:
					case <-ctx.Done():
						return
					}
				}
			}()
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range jobs {
						k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", i), WorkflowExecID: id}
						a, err := finishElement(ctx, base, k, state.Completed)
						if err != nil {
							t.Error(err)
							return
						}
						if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
							t.Errorf("advance after element %d: %v", i, err)
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			m, err := base.GetActivity(ctx, mapKey)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf(`{"items":%d,"completed":%d,"failed":0}`, n, n)
			if m.State != state.Completed || m.Output != want {
				t.Fatalf("the map is %s with %s (%s), want COMPLETED with %s", m.State, m.Output, m.Reason, want)
			}
			if lost := st.lost.Load(); lost != 0 {
				t.Errorf("%d steps of the map lost its compare-and-set: steps of one process met", lost)
			}
			// An element's end reads its shard (again when another count
			// of it landed first), the element after its front, and up to
			// 31 shards to judge whether a step is due, which here, where
			// every element ends as soon as it is written, is often; a
			// step reads the map and the 32 shards. About 25 in all: what
			// matters is that nothing reads in proportion to the map's
			// size (hundreds here), nor repeats a step's reads for every
			// step it lost to.
			if per := float64(st.reads.Load()) / n; per > 40 {
				t.Errorf("%.1f reads per element, want at most 40", per)
			}
			t.Logf("%d reads (%d of the map) for %d elements", st.reads.Load(), st.mapReads.Load(), n)
		})
	}
}

// TestMapStepReadFailsAfterLostWrite: a step of a map whose write of the
// account loses its compare-and-set, and whose read of the map that
// follows fails (a store that stopped answering, a deadline passed),
// returns an error naming the map, without a panic; the map stays
// RUNNING, and a later advance ends it.
func TestMapStepReadFailsAfterLostWrite(t *testing.T) {
	t.Parallel()
	lite, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	ctx := testbin.Context(t)
	if _, err := lite.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	id, mapKey := startMap(t, lite, 1, 10)
	st := &countingStore{Store: lite, mapKey: mapKey}
	a, err := finishElement(ctx, lite, state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 0), WorkflowExecID: id}, state.Completed)
	if err != nil {
		t.Fatal(err)
	}
	st.failMapRead.Store(true)
	_, err = workflow.Advance(ctx, st, a, nil)
	if err == nil || !strings.Contains(err.Error(), mapKey.ActivityExecID) || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("advance: %v, want an error naming the map and the failed read", err)
	}
	if m, err := lite.GetActivity(ctx, mapKey); err != nil || m.State != state.Running {
		t.Fatalf("the map after a failed step: %+v (%v), want RUNNING", m, err)
	}
	if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
		t.Fatal(err)
	}
	if m, err := lite.GetActivity(ctx, mapKey); err != nil || m.State != state.Completed {
		t.Fatalf("the map after the advance again: %+v (%v), want COMPLETED", m, err)
	}
}
