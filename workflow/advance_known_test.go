package workflow_test

import (
	"fmt"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestAdvanceKnownReadiesFromAnUnrelatedlyBrokenDefinition: a wrapper
// whose definition holds a broken entry it does not concern still readies
// its dependents from its own entries.
func TestAdvanceKnownReadiesFromAnUnrelatedlyBrokenDefinition(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		w := storetest.NewWorkflow(t, "mixed", storetest.DAG{"a": nil, "b": {"a"}, "broken": nil})
		w.Exec.Definition = `{"name":"mixed","activities":{"a":{"command":["true"]},"b":{"command":["true"],"depends_on":["a"]},"broken":{"command":7}}}`
		storetest.Create(t, st, w)
		wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		a := end(t, st, storetest.Key(w, "a"), state.Completed)
		res, err := workflow.AdvanceKnown(testbin.Context(t), st, wf, a, nil)
		if err != nil || fmt.Sprint(res.Readied) != fmt.Sprint([]string{storetest.Key(w, "b").ActivityExecID}) {
			t.Fatalf("AdvanceKnown = %+v, %v; want b readied", res, err)
		}
	})
}

// TestAdvanceKnownRetriesOnlyInARunningWorkflow: the item the wrapper read
// at its claim says RUNNING; the workflow was cancelled since. The retry
// is decided on the workflow's state now, read again: none is made.
func TestAdvanceKnownRetriesOnlyInARunningWorkflow(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, retrying)
		claimed, err := st.GetWorkflow(testbin.Context(t), id)
		if err != nil || claimed.State != state.WorkflowRunning {
			t.Fatalf("GetWorkflow = %+v, %v", claimed, err)
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "fetch"), WorkflowExecID: id}
		failed := end(t, st, k, state.Failed)
		if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		res, err := workflow.AdvanceKnown(testbin.Context(t), st, claimed, failed, nil)
		if err != nil || res.Retried != "" {
			t.Fatalf("AdvanceKnown = %+v, %v; want no retry in a cancelled workflow", res, err)
		}
		if n := len(attempts(t, st, id, "fetch")); n != 1 {
			t.Fatalf("%d attempts of fetch; want 1", n)
		}
	})
}
