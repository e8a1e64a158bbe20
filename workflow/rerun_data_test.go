package workflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestRerunKeepsParamsAndCarriedOutputs: a rerun runs with the earlier
// execution's params, and a redrive's carried activities keep their
// outputs, so what depends on them still reads them.
func TestRerunKeepsParamsAndCarriedOutputs(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := workflow.Parse("w.yaml", []byte("name: redo\nparams: {base: {required: true}}\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"echo\", \"{{ outputs.a.n }}\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Params: map[string]string{"base": "7"}})
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, to state.ActivityState, output string) {
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: storetest.Claim("o")}); err != nil {
			t.Fatal(err)
		}
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to, Owner: "o", Exit: &state.Exit{}, Output: output})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
			t.Fatal(err)
		}
	}
	run("a", state.Completed, `{"n":41}`)
	run("b", state.Failed, "")
	if wf, err := st.GetWorkflow(ctx, id); err != nil || wf.State != state.WorkflowFailed {
		t.Fatalf("the first execution: %+v, %v; want FAILED", wf, err)
	}
	again, err := workflow.Rerun(ctx, st, id, true, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := st.GetWorkflow(ctx, again)
	if err != nil || wf.Params != `{"base":"7"}` {
		t.Errorf("the rerun's params %q (%v), want the first's", wf.Params, err)
	}
	a, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(again, "a"), WorkflowExecID: again})
	if err != nil || a.State != state.Completed || a.Output != `{"n":41}` {
		t.Errorf("the carried activity: %s with output %q (%v); want COMPLETED with the first's output", a.State, a.Output, err)
	}
}
