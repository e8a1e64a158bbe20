package workflow_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestStartWakesTheLaunchers: on the embedded store a start nudges
// the launchers announced on it once its first activities are READY, a
// max_active_runs execution let in later nudges them when it is, and a
// start whose caller launches it itself (whimbrel run) nudges nobody.
func TestStartWakesTheLaunchers(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	nl, err := nudge.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	stop, err := st.AnnounceLauncher(nl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	woken := func() bool {
		select {
		case <-nl.C():
			return true
		case <-time.After(500 * time.Millisecond):
			return false
		}
	}
	d, err := definition.Parse("w.yaml", []byte("name: w\nconcurrency: {max_active_runs: 1}\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}

	here, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{LaunchedHere: true})
	if err != nil {
		t.Fatal(err)
	}
	if woken() {
		t.Error("a start its caller launches itself woke a launcher")
	}
	cancelled, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if woken() {
		t.Error("an execution that waits for max_active_runs woke a launcher")
	}
	if _, err := workflow.Cancel(ctx, st, cancelled, "test", nil); err != nil {
		t.Fatal(err)
	}
	waits, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first execution ends: the waiting one is let in, and its
	// first activity is READY when the launchers hear of it.
	if _, err := workflow.Cancel(ctx, st, here, "test", nil); err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("an execution let in by max_active_runs woke no launcher")
	}
	a, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(waits, "a"), WorkflowExecID: waits})
	if err != nil || a.State != state.Ready {
		t.Fatalf("the execution let in: a is %v (%v), want READY", a, err)
	}

	d2, err := definition.Parse("v.yaml", []byte("name: v\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := workflow.Start(ctx, st, d2, workflow.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	if !woken() {
		t.Fatal("a start woke no launcher")
	}
}
