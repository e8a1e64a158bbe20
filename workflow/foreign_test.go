package workflow_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestForeignActivitiesAreEachJudged: another client's workflow has no
// definition, hence no retries, and may give several activities one
// activity_name (a fan-out), or IDs with no name in them at all. Each of
// its activities is judged on its own, as before retries: one that failed
// fails the workflow, whichever item shares its name.
func TestForeignActivitiesAreEachJudged(t *testing.T) {
	for _, tc := range []struct {
		name string
		item func(a *state.ActivityExec)
	}{
		{"one name for many items", func(a *state.ActivityExec) { a.ActivityName = "task" }},
		{"IDs that name no activity", func(a *state.ActivityExec) {
			a.ActivityName = ""
			a.ActivityExecID = uuid.NewString()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bothStores(t, func(t *testing.T, st state.Store) {
				w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": nil, "c": nil})
				w.Exec.Definition = ""
				for i := range w.Activities {
					tc.item(&w.Activities[i])
				}
				storetest.Create(t, st, w)
				ends := []state.ActivityState{state.Completed, state.Failed, state.Completed}
				for i, a := range w.Activities {
					end(t, st, a.ActivityKey, ends[i])
				}
				got, err := workflow.Settle(testbin.Context(t), st, w.Exec.WorkflowExecID, nil)
				if err != nil || got != state.WorkflowFailed {
					t.Fatalf("Settle = %q, %v; want FAILED: one of the activities failed", got, err)
				}
			})
		})
	}
}
