package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// CreateActivity implements state.Store: one PutItem conditional on no
// item having the key, so of any number of participants writing the same
// retry, one writes it and the others learn what it holds.
func (st *Store) CreateActivity(ctx context.Context, a *state.ActivityExec) error {
	if err := attr.CheckNewActivity(a); err != nil {
		return fmt.Errorf("create activity: %w", err)
	}
	out, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           st.table(TableActivityExec),
		Item:                                toAVItem(withShard(attr.EncodeActivity(a))),
		ConditionExpression:                 aws.String("attribute_not_exists(activity_exec_id)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return fmt.Errorf("create activity %s: %w", a.ActivityExecID, attr.Exists(st.prefix+TableActivityExec, a.ActivityExecID, fromAVItem(ccf.Item)))
	case err != nil:
		return fmt.Errorf("create activity %s: %w", a.ActivityExecID, err)
	}
	st.report("CreateActivity", reportOne(out.ConsumedCapacity)...)
	return nil
}
