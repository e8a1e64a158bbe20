package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// RunPools runs the suite of state.PoolStore and of the pool functions
// built on it, which every Store also is.
func RunPools(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"SetListShowDelete", testPoolSetListDelete},
		{"AcquireIsIdempotentAndBounded", testPoolAcquire},
		{"ShrinkAndGrowALivePool", testPoolResize},
		{"ManyShards", testPoolShards},
		{"ConcurrentHoldersNeverPassTheSize", testPoolRace},
		{"LapsedLeaseFreesOnlyWhatDoesNotRun", testPoolLeases},
		{"FullPoolWaitersParked", testPoolParking},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

func pools(t *testing.T, st state.Store) state.PoolStore {
	t.Helper()
	p, ok := st.(state.PoolStore)
	if !ok {
		t.Fatalf("%T is not a state.PoolStore", st)
	}
	return p
}

func holder(id string, slots int, now time.Time) state.PoolHolder {
	return state.PoolHolder{ActivityExecID: id, WorkflowExecID: "wf::1", Slots: slots, Since: now, LeaseUntil: now.Add(state.PoolLease)}
}

func testPoolSetListDelete(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	if _, err := state.SetPool(ctx, ps, "warehouse", 4, "analytics DB <script>", now); err != nil {
		t.Fatal(err)
	}
	if _, err := state.SetPool(ctx, ps, "gpu", 1, "", now); err != nil {
		t.Fatal(err)
	}
	if _, err := state.SetPool(ctx, ps, "bad name\x1b[31m", 1, "", now); err == nil {
		t.Error("a pool name with a terminal escape was accepted")
	}
	if _, err := state.SetPool(ctx, ps, "neg", -1, "", now); err == nil {
		t.Error("a negative size was accepted")
	}
	list, err := ps.ListPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "gpu" || list[1].Name != "warehouse" || list[1].Slots != 4 || list[1].Description != "analytics DB <script>" {
		t.Fatalf("ListPools = %+v", list)
	}
	p, shards, err := ps.PoolItems(ctx, "warehouse")
	if err != nil || p == nil || len(shards) != 1 || shards[0].Capacity != 4 {
		t.Fatalf("PoolItems = %+v %+v %v", p, shards, err)
	}
	if err := ps.DeletePool(ctx, "warehouse"); err != nil {
		t.Fatal(err)
	}
	if err := ps.DeletePool(ctx, "warehouse"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("deleting a deleted pool: %v, want ErrNotFound", err)
	}
	p, shards, err = ps.PoolItems(ctx, "warehouse")
	if err != nil || p != nil || len(shards) != 0 {
		t.Fatalf("after delete: %+v %+v %v", p, shards, err)
	}
	var we *state.PoolWaitError
	if err := state.AcquireSlots(ctx, ps, "warehouse", holder("a::1", 1, now)); !errors.As(err, &we) || we.Error() != "waiting for pool warehouse: not defined" {
		t.Errorf("acquire in a deleted pool: %v", err)
	}
}

func testPoolAcquire(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	if _, err := state.SetPool(ctx, ps, "p", 3, "", now); err != nil {
		t.Fatal(err)
	}
	mustTake := func(id string, n int) {
		t.Helper()
		if err := state.AcquireSlots(ctx, ps, "p", holder(id, n, now)); err != nil {
			t.Fatalf("acquire %s: %v", id, err)
		}
	}
	mustTake("a::1", 2)
	mustTake("a::1", 2) // again: idempotent
	var we *state.PoolWaitError
	if err := state.AcquireSlots(ctx, ps, "p", holder("b::1", 2, now)); !errors.As(err, &we) || we.Reason != "2 of 3 slots held" {
		t.Fatalf("a second holder of 2 in a pool of 3: %v", err)
	}
	mustTake("c::1", 1)
	if err := state.AcquireSlots(ctx, ps, "p", holder("d::1", 4, now)); !errors.As(err, &we) || we.Reason != "needs 4 slots, the pool has 3" {
		t.Fatalf("a holder of 4 in a pool of 3: %v", err)
	}
	st, err := state.ReadPool(ctx, ps, "p")
	if err != nil || st.Held != 3 || len(st.Holders) != 2 {
		t.Fatalf("ReadPool = %+v, %v", st, err)
	}
	if err := state.ReleaseSlots(ctx, ps, "p", state.ActivityKey{ActivityExecID: "a::1", WorkflowExecID: "wf::1"}); err != nil {
		t.Fatal(err)
	}
	if err := state.ReleaseSlots(ctx, ps, "p", state.ActivityKey{ActivityExecID: "a::1", WorkflowExecID: "wf::1"}); err != nil {
		t.Fatalf("a second release: %v", err)
	}
	mustTake("b::1", 2)
}

func testPoolResize(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	if _, err := state.SetPool(ctx, ps, "p", 4, "", now); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := state.AcquireSlots(ctx, ps, "p", holder(fmt.Sprintf("a%d::1", i), 1, now)); err != nil {
			t.Fatal(err)
		}
	}
	// Fewer slots: nothing held is let go, nothing new is let in until
	// under the limit.
	if _, err := state.SetPool(ctx, ps, "p", 2, "", now); err != nil {
		t.Fatal(err)
	}
	st, _ := state.ReadPool(ctx, ps, "p")
	if st.Held != 4 || st.Pool.Slots != 2 {
		t.Fatalf("after shrinking: %+v", st)
	}
	for i := range 3 {
		if err := state.ReleaseSlots(ctx, ps, "p", state.ActivityKey{ActivityExecID: fmt.Sprintf("a%d::1", i), WorkflowExecID: "wf::1"}); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := state.AcquireSlots(ctx, ps, "p", holder("new::1", 1, now)); err == nil {
				t.Fatalf("a holder was let in with %d of 2 held", 4-i-1)
			}
		}
	}
	if err := state.AcquireSlots(ctx, ps, "p", holder("new::1", 1, now)); err != nil {
		t.Fatalf("with 1 of 2 held: %v", err)
	}
	// More slots: at once.
	if _, err := state.SetPool(ctx, ps, "p", 5, "", now); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := state.AcquireSlots(ctx, ps, "p", holder(fmt.Sprintf("g%d::1", i), 1, now)); err != nil {
			t.Fatalf("after growing to 5, holder %d: %v", 2+i+1, err)
		}
	}
	if err := state.AcquireSlots(ctx, ps, "p", holder("over::1", 1, now)); err == nil {
		t.Fatal("a sixth holder was let into a pool of 5")
	}
}

func testPoolShards(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	const n = 2*state.SlotsPerShard + 3
	if _, err := state.SetPool(ctx, ps, "big", n, "", now); err != nil {
		t.Fatal(err)
	}
	_, shards, err := ps.PoolItems(ctx, "big")
	if err != nil || len(shards) != 3 {
		t.Fatalf("a pool of %d: %d shards, %v", n, len(shards), err)
	}
	for i := range n {
		if err := state.AcquireSlots(ctx, ps, "big", holder(fmt.Sprintf("a%d::1", i), 1, now)); err != nil {
			t.Fatalf("holder %d of %d: %v", i+1, n, err)
		}
	}
	if err := state.AcquireSlots(ctx, ps, "big", holder("over::1", 1, now)); err == nil {
		t.Fatal("one holder too many was let in")
	}
	// Shrinking to one shard drains the others.
	if _, err := state.SetPool(ctx, ps, "big", 1, "", now); err != nil {
		t.Fatal(err)
	}
	_, shards, _ = ps.PoolItems(ctx, "big")
	total := 0
	for _, s := range shards {
		total += s.Capacity
	}
	if total != 1 {
		t.Fatalf("after shrinking to 1 the shards' capacities add up to %d", total)
	}
}

// testPoolRace runs many takers and releasers at once and samples the
// held count after every change: it never passes the pool's size.
func testPoolRace(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	const size = 3
	if _, err := state.SetPool(ctx, ps, "race", size, "", now); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				id := fmt.Sprintf("w%d-%d::1", w, i)
				deadline := time.Now().Add(60 * time.Second)
				for {
					err := state.AcquireSlots(ctx, ps, "race", holder(id, 1, now))
					if err == nil {
						break
					}
					var we *state.PoolWaitError
					if !errors.As(err, &we) || time.Now().After(deadline) {
						errs <- err
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
				st, err := state.ReadPool(ctx, ps, "race")
				if err != nil {
					errs <- err
					return
				}
				if st.Held > size {
					errs <- fmt.Errorf("%d slots held in a pool of %d", st.Held, size)
				}
				if err := state.ReleaseSlots(ctx, ps, "race", state.ActivityKey{ActivityExecID: id, WorkflowExecID: "wf::1"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st, _ := state.ReadPool(ctx, ps, "race"); st == nil || st.Held != 0 {
		t.Errorf("after every release: %+v", st)
	}
}

type activityMap map[string]*state.ActivityExec

func (m activityMap) GetActivity(_ context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	if a := m[k.ActivityExecID]; a != nil {
		return a, nil
	}
	return nil, &state.NotFoundError{Kind: "activity", ID: k.ActivityExecID}
}

func testPoolLeases(t *testing.T, h Harness) {
	ctx := context.Background()
	ps := pools(t, h.New(t))
	now := state.Truncate(time.Now())
	if _, err := state.SetPool(ctx, ps, "p", 10, "", now); err != nil {
		t.Fatal(err)
	}
	lapsed := now.Add(-time.Second)
	acts := activityMap{}
	for i, s := range []state.ActivityState{state.Running, state.Queued, state.Ready, state.Completed, state.TimedOut, state.CancelledRunning} {
		id := fmt.Sprintf("a%d::1", i)
		acts[id] = &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: id, WorkflowExecID: "wf::1"}, State: s, StateTime: now}
		hd := holder(id, 1, now.Add(-2*state.PoolLease))
		hd.LeaseUntil = lapsed
		if err := state.AcquireSlots(ctx, ps, "p", hd); err != nil {
			t.Fatal(err)
		}
	}
	// One holder whose activity is gone, one whose lease has not lapsed.
	gone := holder("gone::1", 1, now)
	gone.LeaseUntil = lapsed
	if err := state.AcquireSlots(ctx, ps, "p", gone); err != nil {
		t.Fatal(err)
	}
	if err := state.AcquireSlots(ctx, ps, "p", holder("fresh::1", 1, now)); err != nil {
		t.Fatal(err)
	}
	_, shards, _ := ps.PoolItems(ctx, "p")
	freed, err := state.ReviewLeases(ctx, ps, acts, "p", shards, now)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.ReadPool(ctx, ps, "p")
	var left []string
	for _, hd := range st.Holders {
		left = append(left, hd.ActivityExecID)
		if hd.ActivityExecID != "fresh::1" && !hd.LeaseUntil.After(now) {
			t.Errorf("holder %s kept its slot without a renewed lease", hd.ActivityExecID)
		}
	}
	// RUNNING, QUEUED and CANCELLED_RUNNING without an end keep theirs.
	want := map[string]bool{"a0::1": true, "a1::1": true, "a5::1": true, "fresh::1": true}
	if freed != 4 || len(left) != len(want) {
		t.Fatalf("freed %d, left %v; want 4 freed and %v left", freed, left, want)
	}
	for _, id := range left {
		if !want[id] {
			t.Errorf("%s keeps its slot", id)
		}
	}
}
