package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
)

// WorkflowState reads a workflow's state alone, with a consistent read
// projected on it: a launcher that has its definition already need not
// receive and decode the item's definition (150 kB for 2,000 activities)
// at every pass. DynamoDB charges the read on the whole item all the same.
// An item whose state is missing or not one of the contract's is read
// whole, so that the error names what is wrong with it.
func (st *Store) WorkflowState(ctx context.Context, id string) (state.WorkflowState, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return "", fmt.Errorf("get workflow: %w", err)
	}
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: st.table(TableWorkflowExec), Key: workflowKey(id, name), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: map[string]string{"#s": "state"},
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	if err != nil {
		return "", fmt.Errorf("get workflow %s: %w", id, err)
	}
	st.report("GetWorkflow", reportOne(out.ConsumedCapacity)...)
	if len(out.Item) == 0 {
		return "", &state.NotFoundError{Kind: "workflow", ID: id}
	}
	if s, ok := out.Item["state"].(*types.AttributeValueMemberS); ok && state.WorkflowState(s.Value).Valid() {
		return state.WorkflowState(s.Value), nil
	}
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return "", err
	}
	return wf.State, nil
}
