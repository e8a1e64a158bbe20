package workflow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/definition"
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
	d, err := definition.Parse("w.yaml", []byte("name: redo\nparams: {base: {required: true}}\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"echo\", \"{{ outputs.a.n }}\"], depends_on: [a]}\n"))
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

// TestRerunChecksStoredParams: a rerun binds the earlier execution's
// params again, so a value a stranger wrote into the item is refused as
// start refuses it.
func TestRerunChecksStoredParams(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	st := dynamotest.NewStore(t, dynamodb.Options{Prefix: prefix})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := definition.Parse("w.yaml", []byte("name: typed-rerun\nparams: {base: {type: int}}\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Params: map[string]string{"base": "2 )); echo INJECTED; echo $(( 3"}}); err == nil ||
		!strings.Contains(err.Error(), `param "base": "2 )); echo INJECTED; echo $(( 3" is not an int`) {
		t.Fatalf("Start with a bad int: %v; want refused", err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Params: map[string]string{"base": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = dynamotest.Client(t).UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: aws.String(prefix + dynamodb.TableWorkflowExec),
		Key: map[string]types.AttributeValue{"workflow_exec_id": &types.AttributeValueMemberS{Value: id},
			"workflow_name": &types.AttributeValueMemberS{Value: "typed-rerun"}},
		UpdateExpression:          aws.String("SET params = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: `{"base": "2 )); echo INJECTED; echo $(( 3"}`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.Rerun(ctx, st, id, false, workflow.StartOptions{}); err == nil || !strings.Contains(err.Error(), `param "base": "2 )); echo INJECTED; echo $(( 3" is not an int`) {
		t.Errorf("rerun of an execution with a forged param: %v; want refused naming it", err)
	}
}
