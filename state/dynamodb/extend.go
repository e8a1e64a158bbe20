package dynamodb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/codec"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Extending the store. A package that keeps items of its own in the
// contract's tables (the Simple Lambda API's inbox and stream positions,
// in package simpleapi and below) reaches DynamoDB through the Store's
// client, so that its calls are bounded and their errors translated as the
// Store's own, accounts for the capacity they consume, reads items with
// the shared codec (package state/codec), and may make an activity write
// together with writes of its own in one transaction (UpdateActivityWith).

// API returns the store's client: every call is bounded by the store's
// timeouts, and an endpoint that does not answer, a missing table or a
// missing configuration is reported as the Store reports it.
func (st *Store) API() API { return st.api }

// Table returns the name of a table, prefix included; base is its name
// without prefix (TableActivityEvent, ...).
func (st *Store) Table(base string) string { return st.prefix + base }

// Report records the capacity consumed by a call made through API, under
// the operation's name, as the Store records its own (Options.Capacity).
func (st *Store) Report(op string, cc ...types.ConsumedCapacity) { st.report(op, cc...) }

// ReturnCapacity is what a call made through API asks DynamoDB to return
// of the capacity it consumes, for Report.
func (st *Store) ReturnCapacity() types.ReturnConsumedCapacity { return st.returnCapacity() }

// Undecoded reports the items a read could not decode, in the store's log
// (see state.Store).
func (st *Store) Undecoded() *codec.Reporter { return st.undecoded }

// ToAV converts an item of the codec to the SDK's form.
func ToAV(it codec.Item) map[string]types.AttributeValue { return toAVItem(it) }

// FromAV converts an item of the SDK's form to the codec's; nil for an
// empty one (what DynamoDB returns for an absent item).
func FromAV(m map[string]types.AttributeValue) codec.Item { return nilIfEmpty(m) }

// Get reads an item by its key (strongly consistent); nil if there is none.
func (st *Store) Get(ctx context.Context, op, base string, key map[string]types.AttributeValue) (codec.Item, error) {
	return st.get(ctx, op, base, key)
}

// Query runs a Query to its end (or to limit items, 0: no limit), handing
// each item to fn, and accounts for its capacity under op.
func (st *Store) Query(ctx context.Context, op string, in *dynamodb.QueryInput, limit int, fn func(map[string]types.AttributeValue) error) error {
	return st.query(ctx, op, in, limit, fn)
}

// AlsoError is UpdateActivityWith's error when the condition of one of the
// further writes failed: Index is its place among them, Item what the item
// held (nil: there is none). Nothing was written.
type AlsoError struct {
	Index int
	Item  codec.Item
}

func (e *AlsoError) Error() string {
	return fmt.Sprintf("the condition of further write %d failed", e.Index)
}

// UpdateActivityWith makes the activity write c, with the compare-and-set
// swap (nil: none) on the same item, and the further conditional updates
// also (each with its own full table name, key and condition), in one
// transaction: all of them or none. It returns the activity as written.
// When the activity's condition fails, it returns what UpdateActivity
// returns; when one of also's, an *AlsoError.
func (st *Store) UpdateActivityWith(ctx context.Context, key state.ActivityKey, c state.ActivityChange, swap *codec.Swap, also ...types.Update) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChangeWith(c, swap)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	upd = shardUpdate(key, upd) // a move takes the item to its new state's shard, as UpdateActivity's do
	if len(also) == 0 {
		return st.updateActivity(ctx, "UpdateActivity", key, cond, upd)
	}
	if len(also) >= maxTransactItems {
		return nil, fmt.Errorf("update activity %s: %d further writes are more than a transaction holds", key.ActivityExecID, len(also))
	}
	expr, err := expressionOf(cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	writes := []types.TransactWriteItem{{Update: &types.Update{
		TableName:                           st.table(TableActivityExec),
		Key:                                 toAVItem(attr.ActivityKey(key)),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	for _, u := range also {
		u.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
		writes = append(writes, types.TransactWriteItem{Update: &u})
	}
	out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: writes, ReturnConsumedCapacity: st.returnCapacity(),
	})
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) && len(tc.CancellationReasons) == len(writes) {
		for i, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) != "ConditionalCheckFailed" {
				continue
			}
			if i == 0 {
				return nil, attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, nilIfEmpty(r.Item))
			}
			return nil, &AlsoError{Index: i - 1, Item: nilIfEmpty(r.Item)}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	st.report("UpdateActivityWith", out.ConsumedCapacity...)
	return st.GetActivity(ctx, key)
}

// ValueToAV converts one value of the codec to the SDK's form.
func ValueToAV(v codec.Value) types.AttributeValue { return toAV(v) }

// IndexActivity is the activity_event table's index by activity_exec_id
// (sorted by when_epoch), which whimbrel install creates.
const IndexActivity = indexActivity

// maxTransactItems is the most items DynamoDB takes in one transaction.
const maxTransactItems = 100
