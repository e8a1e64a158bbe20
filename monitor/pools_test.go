package monitor_test

import (
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
)

// TestSweepFreesTheLapsedSlotsOfAnIdlePool: a slot whose release failed
// as its activity ended (the store unusable past its retries) is freed by
// the monitor's sweep once its lease lapsed, though no activity waits for
// the pool; a holder whose activity still runs keeps its slot, and its
// shard is not written.
func TestSweepFreesTheLapsedSlotsOfAnIdlePool(t *testing.T) {
	t.Parallel()
	ctx := testbin.Context(t)
	f := newFixture(t, "name: wf\nactivities:\n  ended: {command: [\"true\"], pool: p}\n  runs: {command: [\"true\"], pool: p}\n")
	now := time.Now()
	if _, err := state.SetPool(ctx, f.st, "p", 3, "", now); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ended", "runs"} {
		k := f.key(name)
		if err := state.AcquireSlots(ctx, f.st, "p", state.PoolHolder{ActivityExecID: k.ActivityExecID, WorkflowExecID: k.WorkflowExecID,
			Slots: 1, Since: now.Add(-3 * time.Minute), LeaseUntil: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		f.move(t, name, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "w-" + name, Host: "h"}})
	}
	f.move(t, "ended", state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "w-ended", Exit: &state.Exit{}})

	if _, err := monitor.New(f.st, monitor.Config{}).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := state.ReadPool(ctx, f.st, "p")
	if err != nil {
		t.Fatal(err)
	}
	if p.Held != 1 || len(p.Holders) != 1 || p.Holders[0].ActivityExecID != f.key("runs").ActivityExecID {
		t.Fatalf("pool after the sweep: %d held by %+v, want 1 held by the running activity", p.Held, p.Holders)
	}
	// The sweep renews no lease: a pool whose holders all run is read,
	// never written, however long they run.
	if p.Holders[0].LeaseUntil.After(now) {
		t.Errorf("the sweep renewed the running activity's lease, to %s: it rewrote a shard it had no slot to free in", p.Holders[0].LeaseUntil)
	}
	_, before, err := f.st.PoolItems(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.New(f.st, monitor.Config{}).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	_, after, err := f.st.PoolItems(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if after[i].Version != before[i].Version {
			t.Errorf("a sweep rewrote shard %d of a pool whose holders all run (version %d to %d)", after[i].Index, before[i].Version, after[i].Version)
		}
	}
}
