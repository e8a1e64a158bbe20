package schedule_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestRunErrorIsTheFinalAttempts: a run that failed names the activity
// that failed for good, not an earlier attempt of another one that was
// retried and then completed.
func TestRunErrorIsTheFinalAttempts(t *testing.T) {
	st := newSQLite(t)
	d, err := definition.Parse("r.yaml", []byte("name: r\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2, interval: 1ms}}\n  b: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	end := func(k state.ActivityKey, to state.ActivityState, code int, stderr string) *state.ActivityExec {
		t.Helper()
		if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
			Claim: &state.Claim{Owner: "o"}}); err != nil {
			t.Fatal(err)
		}
		a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to,
			Owner: "o", Exit: &state.Exit{Code: code}, Error: stderr})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := workflow.Advance(testbin.Context(t), st, a, nil); err != nil {
			t.Fatal(err)
		}
		return a
	}
	key := func(id, name string) state.ActivityKey {
		return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
	}
	a1 := end(key(id, "a"), state.Failed, 1, "transient\n")
	end(state.ActivityKey{ActivityExecID: state.RetryIDFor(a1.ActivityExecID), WorkflowExecID: id}, state.Completed, 0, "")
	end(key(id, "b"), state.Failed, 3, "broken for good\n")
	if w, err := st.GetWorkflow(testbin.Context(t), id); err != nil || w.State != state.WorkflowFailed {
		t.Fatalf("workflow %+v, %v; want FAILED", w, err)
	}
	r, ok, err := schedule.LastRun(testbin.Context(t), st, &state.Schedule{Runs: []state.ScheduleRun{{WorkflowExecID: id}}})
	if err != nil || !ok || r.Error != "b FAILED (exit 3): broken for good" {
		t.Errorf("LastRun = %+v, %v, %v; want the error of b, which failed for good", r, ok, err)
	}
}
