// Package dynamoinbox keeps the Simple Lambda API's items (requests,
// events, registrations) in a DynamoDB store's tables: the inbox.Inbox on
// DynamoDB, through state/dynamodb's extension points.
package dynamoinbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/codec"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Inbox is the inbox.Inbox on a DynamoDB store.
type Inbox struct {
	st     *dynamodb.Store
	prefix string
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox kept in st's tables.
func New(st *dynamodb.Store) *Inbox { return &Inbox{st: st, prefix: st.Prefix()} }

type item = map[string]types.AttributeValue

func (st *Inbox) table(base string) *string { return aws.String(st.st.Table(base)) }

// report accounts for the capacity of one call.
func report(st *dynamodb.Store, op string, cc *types.ConsumedCapacity) {
	if cc != nil {
		st.Report(op, *cc)
	}
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func requestKey(id, name string) item {
	return item{"workflow_request_id": avS(id), "workflow_name": avS(name)}
}

func eventKey(id, activityExecID string) item {
	return item{"activity_event_id": avS(id), "activity_exec_id": avS(activityExecID)}
}

// PutRequest implements inbox.Inbox.
func (st *Inbox) PutRequest(ctx context.Context, r *state.WorkflowRequest) error {
	return inbox.PutRequest(r, func() (codec.Item, error) {
		return st.putNew(ctx, "PutRequest", dynamodb.TableWorkflowRequest, "workflow_request_id", codec.EncodeRequest(r))
	})
}

// PutEvent implements inbox.Inbox.
func (st *Inbox) PutEvent(ctx context.Context, e *state.ActivityEvent) error {
	return inbox.PutEvent(e, func() (codec.Item, error) {
		return st.putNew(ctx, "PutEvent", dynamodb.TableActivityEvent, "activity_event_id", codec.EncodeEvent(e))
	})
}

// putNew puts an item unless its key exists; then it returns the item that
// is there.
func (st *Inbox) putNew(ctx context.Context, op, base, hashKey string, it codec.Item) (codec.Item, error) {
	out, err := st.st.API().PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName:                           st.table(base),
		Item:                                dynamodb.ToAV(it),
		ConditionExpression:                 aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames:            map[string]string{"#k": hashKey},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.st.ReturnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		old := dynamodb.FromAV(ccf.Item)
		if old == nil {
			old = codec.Item{}
		}
		return old, nil
	case err != nil:
		return nil, err
	}
	report(st.st, op, out.ConsumedCapacity)
	return nil, nil
}

// RecordRequest implements inbox.Inbox.
func (st *Inbox) RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o state.Outcome) error {
	set := codec.OutcomeItem(o)
	if workflowExecID != "" {
		set["workflow_exec_id"] = codec.S(workflowExecID)
	}
	return st.recordOutcome(ctx, "RecordRequest", dynamodb.TableWorkflowRequest, "workflow request", "workflow_request_id",
		requestKey(id, workflowName), id, set)
}

// RecordEvent implements inbox.Inbox.
func (st *Inbox) RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error {
	return st.recordOutcome(ctx, "RecordEvent", dynamodb.TableActivityEvent, "activity event", "activity_event_id",
		eventKey(id, activityExecID), id, codec.OutcomeItem(o))
}

// outcomeUpdate is the update that records an outcome on an existing item
// that has none yet. An event written without when_epoch (the base
// contract's shape has only the when list; docs/contract.md#activity_event) gets the processing time there, so that the
// activity index, and whimbrel status through it, finds every decided
// event.
func outcomeUpdate(base *string, hashKey string, key item, set codec.Item) *types.Update {
	names := map[string]string{"#k": hashKey, "#o": "outcome"}
	values := map[string]types.AttributeValue{}
	expr := "SET "
	i := 0
	for k, v := range set {
		if i > 0 {
			expr += ", "
		}
		n, val := fmt.Sprintf("#a%d", i), fmt.Sprintf(":v%d", i)
		names[n], values[val] = k, dynamodb.ValueToAV(v)
		expr += n + " = " + val
		i++
	}
	if pt, ok := set["processed_time_epoch"]; ok && hashKey == "activity_event_id" {
		names["#we"], values[":we"] = "when_epoch", dynamodb.ValueToAV(pt)
		expr += ", #we = if_not_exists(#we, :we)"
	}
	return &types.Update{
		TableName:                           base,
		Key:                                 key,
		ConditionExpression:                 aws.String("attribute_exists(#k) AND attribute_not_exists(#o)"),
		UpdateExpression:                    aws.String(expr),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

func (st *Inbox) recordOutcome(ctx context.Context, op, base, kind, hashKey string, key item, id string, set codec.Item) error {
	if _, ok := set["outcome"]; !ok {
		return fmt.Errorf("record the outcome of %s %s: no result given", kind, id)
	}
	u := outcomeUpdate(st.table(base), hashKey, key, set)
	out, err := st.st.API().UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
		UpdateExpression: u.UpdateExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
		ReturnConsumedCapacity:              st.st.ReturnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return outcomeConflict(kind, id, dynamodb.FromAV(ccf.Item))
	case err != nil:
		return fmt.Errorf("record the outcome of %s %s: %w", kind, id, err)
	}
	report(st.st, op, out.ConsumedCapacity)
	return nil
}

// outcomeConflict is the error for an outcome that was not recorded: the
// item is gone, or it has one already.
func outcomeConflict(kind, id string, old codec.Item) error {
	if old == nil {
		return &state.NotFoundError{Kind: kind, ID: id}
	}
	got, _ := old["outcome"].(codec.S)
	return &state.ConflictError{Kind: kind, ID: id, Want: "no outcome yet", State: string(got)}
}

// GetEvent implements inbox.Inbox.
func (st *Inbox) GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error) {
	m, err := st.st.Get(ctx, "GetEvent", dynamodb.TableActivityEvent, eventKey(id, activityExecID))
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "activity event", ID: id}
	}
	v, err := codec.DecodeEvent(st.prefix+dynamodb.TableActivityEvent, m)
	return v, st.st.Undecoded().Check(err)
}

// Events implements inbox.Inbox, through the activity index. An event that
// cannot be decoded is left out — the processor judges it from its own
// record — unless a processor recorded an outcome on it (its rejection):
// it is then listed as far as it could be read, so that whimbrel status
// shows it.
func (st *Inbox) Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error) {
	var out []*state.ActivityEvent
	in := &awsdynamodb.QueryInput{
		TableName:                 st.table(dynamodb.TableActivityEvent),
		IndexName:                 aws.String(dynamodb.IndexActivity),
		KeyConditionExpression:    aws.String("activity_exec_id = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS(activityExecID)},
	}
	if !from.IsZero() {
		in.KeyConditionExpression = aws.String("activity_exec_id = :a AND when_epoch >= :w")
		// A foreign client's epoch may be finer than the millisecond.
		in.ExpressionAttributeValues[":w"] = dynamodb.ValueToAV(codec.Epoch(from.Add(-time.Millisecond)))
	}
	skips := st.st.Undecoded().NewSkips()
	err := st.st.Query(ctx, "Events", in, 0, func(m item) error {
		e, err := codec.DecodeEvent(st.prefix+dynamodb.TableActivityEvent, dynamodb.FromAV(m))
		if err != nil && e != nil && e.Outcome.Processed() {
			out = append(out, e)
			return nil
		}
		if err != nil {
			return skips.Add(err)
		}
		if e.When.Before(from) {
			return nil
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", activityExecID, err)
	}
	sort.Slice(out, func(i, j int) bool { return state.EventCursor(out[i]) < state.EventCursor(out[j]) })
	return out, skips.Err()
}

// Register implements inbox.Inbox.
func (st *Inbox) Register(ctx context.Context, r *state.WorkflowLambda) error {
	if err := state.CheckName(r.WorkflowName); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	_, err := st.st.API().PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName: st.table(dynamodb.TableWorkflowLambda), Item: dynamodb.ToAV(codec.EncodeRegistration(r)),
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", r.WorkflowName, err)
	}
	return nil
}

// Registration implements inbox.Inbox.
func (st *Inbox) Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error) {
	m, err := st.st.Get(ctx, "Registration", dynamodb.TableWorkflowLambda, item{"workflow_name": avS(workflowName)})
	if err != nil {
		return nil, fmt.Errorf("read the registration of %s: %w", workflowName, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "registered workflow", ID: workflowName}
	}
	v, err := codec.DecodeRegistration(st.prefix+dynamodb.TableWorkflowLambda, m)
	return v, st.st.Undecoded().Check(err)
}

// Registrations implements inbox.Inbox with a Scan: the table holds one
// small item per workflow.
func (st *Inbox) Registrations(ctx context.Context) ([]*state.WorkflowLambda, error) {
	var out []*state.WorkflowLambda
	skips := st.st.Undecoded().NewSkips()
	p := awsdynamodb.NewScanPaginator(st.st.API(), &awsdynamodb.ScanInput{
		TableName: st.table(dynamodb.TableWorkflowLambda), ConsistentRead: aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list registered workflows: %w", err)
		}
		for _, m := range page.Items {
			r, err := codec.DecodeRegistration(st.prefix+dynamodb.TableWorkflowLambda, dynamodb.FromAV(m))
			if err != nil {
				_ = skips.Add(err) // a decode error: reported, and kept
				continue
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WorkflowName < out[j].WorkflowName })
	return out, skips.Err()
}

// Decide implements inbox.Inbox: the activity write moves its cursor, and
// the outcome is recorded on the event, in one transaction.
func (st *Inbox) Decide(ctx context.Context, key state.ActivityKey, c state.ActivityChange, step inbox.Step) (*state.ActivityExec, error) {
	if err := step.Check(); err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	swap := &codec.Swap{Attr: inbox.CursorAttr, Old: step.Prev, New: step.Next}
	if step.Outcome == nil {
		return st.st.UpdateActivityWith(ctx, key, c, swap)
	}
	a, err := st.st.UpdateActivityWith(ctx, key, c, swap,
		*outcomeUpdate(st.table(dynamodb.TableActivityEvent), "activity_event_id", eventKey(step.EventID, key.ActivityExecID), codec.OutcomeItem(*step.Outcome)))
	var also *dynamodb.AlsoError
	if errors.As(err, &also) {
		return nil, outcomeConflict("activity event", step.EventID, also.Item)
	}
	return a, err
}

// DecodeRequestImage reads a workflow_request item as a stream record
// carries it.
func DecodeRequestImage(image map[string]types.AttributeValue) (*state.WorkflowRequest, error) {
	return codec.DecodeRequest(dynamodb.TableWorkflowRequest, dynamodb.FromAV(image))
}

// DecodeEventImage reads an activity_event item as a stream record carries
// it.
func DecodeEventImage(image map[string]types.AttributeValue) (*state.ActivityEvent, error) {
	return codec.DecodeEvent(dynamodb.TableActivityEvent, dynamodb.FromAV(image))
}

// FindActivity implements inbox.Inbox: one query on the activity table's
// hash key.
func (st *Inbox) FindActivity(ctx context.Context, activityExecID string) (*state.ActivityExec, error) {
	var found item
	err := st.st.Query(ctx, "FindActivity", &awsdynamodb.QueryInput{
		TableName:                 st.table(dynamodb.TableActivityExec),
		KeyConditionExpression:    aws.String("activity_exec_id = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS(activityExecID)},
		ConsistentRead:            aws.Bool(true),
	}, 1, func(m item) error {
		found = m
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("find activity %s: %w", activityExecID, err)
	}
	if found == nil {
		return nil, &state.NotFoundError{Kind: "activity", ID: activityExecID}
	}
	a, err := codec.DecodeActivity(st.prefix+dynamodb.TableActivityExec, dynamodb.FromAV(found))
	return a, st.st.Undecoded().Check(err)
}
