package launcher

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestForgetEndedFreesAKeyReadReady: a key held as running whose item a
// pass reads READY (put back by a client writing outside the contract,
// since a claimed key never returns to READY) holds its slot no more:
// take refuses a key held as running, so nothing else would free it.
func TestForgetEndedFreesAKeyReadReady(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("test.yaml", []byte("name: putback\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	l := New(st, Config{Interval: time.Minute, MaxRunning: 1})
	if ok, _ := l.slots.take(k, time.Now()); !ok {
		t.Fatal("take(a) refused")
	}
	l.slots.done(k, true) // held as running; its item is READY
	if err := l.forgetEnded(ctx); err != nil {
		t.Fatal(err)
	}
	if got := l.slots.running(); len(got) != 0 {
		t.Errorf("held as running after a pass read the item READY: %v; want its slot free", got)
	}
	if ok, full := l.slots.take(k, time.Now()); !ok || full {
		t.Errorf("take(a) after: ok %v, full %v; want it tried again", ok, full)
	}
}
