package launcher_test

import (
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestKnownWorkflowStillSeesItsEnd: a launcher that has parsed a
// workflow's definition reads only the workflow's state at its next
// passes; a workflow that ended meanwhile (here cancelled with a READY
// activity left behind, as a cancel that crashed half-way leaves it for
// the monitor) gets nothing more launched, and one still running gets its
// readied activities launched. On both stores, and on DynamoDB behind
// the fault proxy.
func TestKnownWorkflowStillSeesItsEnd(t *testing.T) {
	childStores(t, true, func(t *testing.T, st, clean state.Store) {
		backend := &launchtest.Counting{}
		l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
		yaml := "name: known\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n  c: {command: [\"true\"], depends_on: [a]}\n"
		ended, _ := launchtest.Start(t, clean, yaml)
		running, _ := launchtest.Start(t, clean, yaml)
		// The first passes launch both roots, and parse both definitions.
		launchUntil(t, l, backend, 2)
		for _, id := range []string{ended, running} {
			key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
			claim := &state.Claim{Owner: "wrapper", Host: "h", PID: 1}
			a, err := clean.UpdateActivity(launchtest.Context(t), key, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim})
			if err == nil {
				a, err = clean.UpdateActivity(launchtest.Context(t), key, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "wrapper", Exit: &state.Exit{}})
			}
			if err != nil {
				t.Fatal(err)
			}
			if res, err := workflow.Advance(launchtest.Context(t), clean, a, nil); err != nil || len(res.Readied) != 2 {
				t.Fatalf("advance: readied %v, %v", res.Readied, err)
			}
		}
		if _, err := clean.UpdateWorkflow(launchtest.Context(t), ended, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: "cancelled by a test"}); err != nil {
			t.Fatal(err)
		}
		launchUntil(t, l, backend, 4)
		// Three passes more that the store answered launch nothing of the
		// ended workflow.
		deadline := time.Now().Add(60 * time.Second)
		for answered := 0; answered < 3; {
			if time.Now().After(deadline) {
				t.Fatalf("%d passes of the last three answered within a minute", answered)
			}
			if _, err := l.Once(launchtest.Context(t)); err != nil {
				t.Logf("pass: %v", err) // the fault proxy's
				continue
			}
			answered++
		}
		for k, n := range backend.Launches() {
			if k.WorkflowExecID == ended && k.ActivityExecID != state.ActivityExecIDFor(ended, "a") {
				t.Errorf("%s of the cancelled workflow was launched (%d times)", k.ActivityExecID, n)
			}
			if n != 1 {
				t.Errorf("%s launched %d times", k.ActivityExecID, n)
			}
		}
		for _, name := range []string{"b", "c"} {
			if a := launchtest.Activity(t, clean, ended, name); a.State != state.Ready {
				t.Errorf("%s of the cancelled workflow is %s, want READY (the monitor's to cancel)", name, a.State)
			}
			if a := launchtest.Activity(t, clean, running, name); a.State != state.Queued {
				t.Errorf("%s of the running workflow is %s, want QUEUED (launched)", name, a.State)
			}
		}
	})
}

// launchUntil makes passes until the backend has seen n launches, within
// a bound generous enough for a loaded machine and the fault proxy's
// index lag.
func launchUntil(t *testing.T, l *launcher.Launcher, backend *launchtest.Counting, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(backend.Launches()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d launches after a minute, want %d", len(backend.Launches()), n)
		}
		if _, err := l.Once(launchtest.Context(t)); err != nil {
			t.Logf("pass: %v", err) // the fault proxy's: the next pass tries again
		}
		time.Sleep(50 * time.Millisecond)
	}
}
