package dynamodb_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestAnyLiveOf: the probe a settle makes first tells a live activity
// among the keys it names, counts a missing item as nothing and a
// terminal one as not live, counts an item whose state another client
// wrote outside the contract as live, and reads through the fault proxy's
// partial batches and throttles.
func TestAnyLiveOf(t *testing.T) {
	t.Parallel()
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.1, PartialBatches: true})
	prefix := dynamotest.Prefix(t)
	own := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	if _, err := own.Install(testbin.Context(t), false); err != nil {
		t.Fatal(err)
	}
	st := dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx := testbin.Context(t)
	w := storetest.NewWorkflow(t, "probe", storetest.DAG{"a": nil, "b": nil, "<script>\x1b[31m": nil})
	storetest.Create(t, own, w)
	a, b, hostile := storetest.Key(w, "a"), storetest.Key(w, "b"), storetest.Key(w, "<script>\x1b[31m")
	missing := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(w.Exec.WorkflowExecID, "gone"), WorkflowExecID: w.Exec.WorkflowExecID}
	live := func(keys ...state.ActivityKey) bool {
		t.Helper()
		l, err := st.AnyLiveOf(ctx, keys)
		if err != nil {
			t.Fatalf("AnyLiveOf: %v", err)
		}
		return l
	}
	if live() || live(missing) {
		t.Fatal("no keys, or a missing item: live")
	}
	if !live(missing, a, b) {
		t.Fatal("two REQUESTED activities: not live")
	}
	for _, k := range []state.ActivityKey{a, b, hostile} {
		if _, err := own.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Cancelled}); err != nil {
			t.Fatal(err)
		}
	}
	if live(a, b, hostile, missing) {
		t.Fatal("every activity CANCELLED: live")
	}
	// Another client's item with a state that is not the contract's.
	if _, err := proxy.Client(true).UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: aws.String(prefix + dynamodb.TableActivityExec),
		Key: map[string]types.AttributeValue{"activity_exec_id": &types.AttributeValueMemberS{Value: b.ActivityExecID},
			"workflow_exec_id": &types.AttributeValueMemberS{Value: b.WorkflowExecID}},
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: "PAUSED"}},
	}); err != nil {
		t.Fatal(err)
	}
	if !live(a, b) {
		t.Fatal("an item whose state is not the contract's: not live")
	}
}
