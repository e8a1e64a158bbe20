package inspect_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestPoolShowListsParkedWaiters: a waiter a launcher parked in its
// pool's queue is out of the READY listing, and pool show and pool list
// still count and show it.
func TestPoolShowListsParkedWaiters(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := state.SetPool(ctx, st, "p", 1, "", now); err != nil {
		t.Fatal(err)
	}
	if err := state.AcquireSlots(ctx, st, "p", state.PoolHolder{ActivityExecID: "other::1", WorkflowExecID: "w::1", Slots: 1, Since: now, LeaseUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("p.yaml", []byte("name: p\nactivities:\n  load: {pool: p, command: ['true']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "load"), WorkflowExecID: id}
	if err := st.Park(ctx, k, "p"); err != nil {
		t.Fatal(err)
	}
	v, err := inspect.Pool(ctx, st, "p")
	if err != nil {
		t.Fatal(err)
	}
	if v.Waiting != 1 || len(v.Waiters) != 1 || v.Waiters[0].ActivityID != k.ActivityExecID {
		t.Errorf("pool show: %d waiting, %+v; want the parked waiter", v.Waiting, v.Waiters)
	}
	all, err := inspect.Pools(ctx, st)
	if err != nil || len(all) != 1 || all[0].Waiting != 1 {
		t.Errorf("pool list: %+v, %v; want p with 1 waiting", all, err)
	}
}
