package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// The Simple Lambda API's items: state.Inbox on DynamoDB.

var _ state.Inbox = (*Store)(nil)

func requestKey(id, name string) item {
	return item{"workflow_request_id": avS(id), "workflow_name": avS(name)}
}

func eventKey(id, activityExecID string) item {
	return item{"activity_event_id": avS(id), "activity_exec_id": avS(activityExecID)}
}

// PutRequest implements state.Inbox.
func (st *Store) PutRequest(ctx context.Context, r *state.WorkflowRequest) error {
	if r.WorkflowRequestID == "" || r.WorkflowName == "" {
		return errors.New("put request: it needs an ID and a workflow name")
	}
	old, err := st.putNew(ctx, "PutRequest", TableWorkflowRequest, "workflow_request_id", attr.EncodeRequest(r))
	if err != nil {
		return fmt.Errorf("put request %s: %w", r.WorkflowRequestID, err)
	}
	if old != nil {
		e := &state.ExistsError{What: "workflow request " + r.WorkflowRequestID}
		if v, ok := old["workflow_exec_id"].(attr.S); ok {
			e.WorkflowExecID = string(v)
		}
		return e
	}
	return nil
}

// PutEvent implements state.Inbox.
func (st *Store) PutEvent(ctx context.Context, e *state.ActivityEvent) error {
	if e.ActivityEventID == "" || e.ActivityExecID == "" {
		return errors.New("put event: it needs an ID and an activity")
	}
	old, err := st.putNew(ctx, "PutEvent", TableActivityEvent, "activity_event_id", attr.EncodeEvent(e))
	if err != nil {
		return fmt.Errorf("put event %s: %w", e.ActivityEventID, err)
	}
	if old != nil {
		return &state.ExistsError{What: "activity event " + e.ActivityEventID}
	}
	return nil
}

// putNew puts an item unless its key exists; then it returns the item that
// is there.
func (st *Store) putNew(ctx context.Context, op, base, hashKey string, it attr.Item) (attr.Item, error) {
	out, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           st.table(base),
		Item:                                toAVItem(it),
		ConditionExpression:                 aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames:            map[string]string{"#k": hashKey},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		old := nilIfEmpty(ccf.Item)
		if old == nil {
			old = attr.Item{}
		}
		return old, nil
	case err != nil:
		return nil, err
	}
	st.report(op, reportOne(out.ConsumedCapacity)...)
	return nil, nil
}

// RecordRequest implements state.Inbox.
func (st *Store) RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o state.Outcome) error {
	set := attr.OutcomeItem(o)
	if workflowExecID != "" {
		set["workflow_exec_id"] = attr.S(workflowExecID)
	}
	return st.recordOutcome(ctx, "RecordRequest", TableWorkflowRequest, "workflow request", "workflow_request_id",
		requestKey(id, workflowName), id, set)
}

// RecordEvent implements state.Inbox.
func (st *Store) RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error {
	return st.recordOutcome(ctx, "RecordEvent", TableActivityEvent, "activity event", "activity_event_id",
		eventKey(id, activityExecID), id, attr.OutcomeItem(o))
}

// outcomeUpdate is the update that records an outcome on an existing item
// that has none yet. An event written without when_epoch (seed 000's shape
// has only the when list) gets the processing time there, so that the
// activity index, and whimbrel status through it, finds every decided
// event.
func outcomeUpdate(base *string, hashKey string, key item, set attr.Item) *types.Update {
	names := map[string]string{"#k": hashKey, "#o": "outcome"}
	values := map[string]types.AttributeValue{}
	expr := "SET "
	i := 0
	for k, v := range set {
		if i > 0 {
			expr += ", "
		}
		n, val := fmt.Sprintf("#a%d", i), fmt.Sprintf(":v%d", i)
		names[n], values[val] = k, toAV(v)
		expr += n + " = " + val
		i++
	}
	if pt, ok := set["processed_time_epoch"]; ok && hashKey == "activity_event_id" {
		names["#we"], values[":we"] = "when_epoch", toAV(pt)
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

func (st *Store) recordOutcome(ctx context.Context, op, base, kind, hashKey string, key item, id string, set attr.Item) error {
	if _, ok := set["outcome"]; !ok {
		return fmt.Errorf("record the outcome of %s %s: no result given", kind, id)
	}
	u := outcomeUpdate(st.table(base), hashKey, key, set)
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, ConditionExpression: u.ConditionExpression,
		UpdateExpression: u.UpdateExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
		ExpressionAttributeValues:           u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return outcomeConflict(kind, id, nilIfEmpty(ccf.Item))
	case err != nil:
		return fmt.Errorf("record the outcome of %s %s: %w", kind, id, err)
	}
	st.report(op, reportOne(out.ConsumedCapacity)...)
	return nil
}

// outcomeConflict is the error for an outcome that was not recorded: the
// item is gone, or it has one already.
func outcomeConflict(kind, id string, old attr.Item) error {
	if old == nil {
		return &state.NotFoundError{Kind: kind, ID: id}
	}
	got, _ := old["outcome"].(attr.S)
	return &state.ConflictError{Kind: kind, ID: id, Want: "no outcome yet", State: string(got)}
}

// GetEvent implements state.Inbox.
func (st *Store) GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error) {
	m, err := st.get(ctx, "GetEvent", TableActivityEvent, eventKey(id, activityExecID))
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "activity event", ID: id}
	}
	v, err := attr.DecodeEvent(st.prefix+TableActivityEvent, m)
	return v, st.undecoded.Check(err)
}

// Events implements state.Inbox, through the activity index. An event that
// cannot be decoded is left out — the processor judges it from its own
// record — unless a processor recorded an outcome on it (its rejection):
// it is then listed as far as it could be read, so that whimbrel status
// shows it.
func (st *Store) Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error) {
	var out []*state.ActivityEvent
	in := &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityEvent),
		IndexName:                 aws.String(indexActivity),
		KeyConditionExpression:    aws.String("activity_exec_id = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS(activityExecID)},
	}
	if !from.IsZero() {
		in.KeyConditionExpression = aws.String("activity_exec_id = :a AND when_epoch >= :w")
		// A foreign client's epoch may be finer than the millisecond.
		in.ExpressionAttributeValues[":w"] = toAV(attr.Epoch(from.Add(-time.Millisecond)))
	}
	skips := st.undecoded.NewSkips()
	err := st.query(ctx, "Events", in, 0, func(m item) error {
		e, err := attr.DecodeEvent(st.prefix+TableActivityEvent, fromAVItem(m))
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

// Register implements state.Inbox.
func (st *Store) Register(ctx context.Context, r *state.WorkflowLambda) error {
	if err := state.CheckName(r.WorkflowName); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	_, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: st.table(TableWorkflowLambda), Item: toAVItem(attr.EncodeRegistration(r)),
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", r.WorkflowName, err)
	}
	return nil
}

// Registration implements state.Inbox.
func (st *Store) Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error) {
	m, err := st.get(ctx, "Registration", TableWorkflowLambda, item{"workflow_name": avS(workflowName)})
	if err != nil {
		return nil, fmt.Errorf("read the registration of %s: %w", workflowName, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "registered workflow", ID: workflowName}
	}
	v, err := attr.DecodeRegistration(st.prefix+TableWorkflowLambda, m)
	return v, st.undecoded.Check(err)
}

// Registrations implements state.Inbox with a Scan: the table holds one
// small item per workflow.
func (st *Store) Registrations(ctx context.Context) ([]*state.WorkflowLambda, error) {
	var out []*state.WorkflowLambda
	skips := st.undecoded.NewSkips()
	p := dynamodb.NewScanPaginator(st.api, &dynamodb.ScanInput{
		TableName: st.table(TableWorkflowLambda), ConsistentRead: aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list registered workflows: %w", err)
		}
		for _, m := range page.Items {
			r, err := attr.DecodeRegistration(st.prefix+TableWorkflowLambda, fromAVItem(m))
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

// decideEvent makes an activity write together with the outcome of the
// event it decides, in one transaction, and returns the activity as
// written.
func (st *Store) decideEvent(ctx context.Context, key state.ActivityKey, cond attr.Cond, upd attr.Update, ev *state.EventStep) (*state.ActivityExec, error) {
	expr, err := expressionOf(cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	writes := []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                           st.table(TableActivityExec),
			Key:                                 toAVItem(attr.ActivityKey(key)),
			ConditionExpression:                 expr.Condition(),
			UpdateExpression:                    expr.Update(),
			ExpressionAttributeNames:            expr.Names(),
			ExpressionAttributeValues:           expr.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		{Update: outcomeUpdate(st.table(TableActivityEvent), "activity_event_id",
			eventKey(ev.EventID, key.ActivityExecID), attr.OutcomeItem(*ev.Outcome))},
	}
	out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: writes, ReturnConsumedCapacity: st.returnCapacity(),
	})
	var tc *types.TransactionCanceledException
	switch {
	case errors.As(err, &tc) && len(tc.CancellationReasons) == 2:
		r := tc.CancellationReasons
		if aws.ToString(r[0].Code) == "ConditionalCheckFailed" {
			return nil, attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, nilIfEmpty(r[0].Item))
		}
		if aws.ToString(r[1].Code) == "ConditionalCheckFailed" {
			return nil, outcomeConflict("activity event", ev.EventID, nilIfEmpty(r[1].Item))
		}
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	case err != nil:
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	st.report("DecideEvent", out.ConsumedCapacity...)
	return st.GetActivity(ctx, key)
}

// DecodeRequestImage reads a workflow_request item as a stream record
// carries it.
func DecodeRequestImage(image map[string]types.AttributeValue) (*state.WorkflowRequest, error) {
	return attr.DecodeRequest(TableWorkflowRequest, fromAVItem(image))
}

// DecodeEventImage reads an activity_event item as a stream record carries
// it.
func DecodeEventImage(image map[string]types.AttributeValue) (*state.ActivityEvent, error) {
	return attr.DecodeEvent(TableActivityEvent, fromAVItem(image))
}

// FindActivity implements state.Inbox: one query on the activity table's
// hash key.
func (st *Store) FindActivity(ctx context.Context, activityExecID string) (*state.ActivityExec, error) {
	var found item
	err := st.query(ctx, "FindActivity", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
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
	a, err := attr.DecodeActivity(st.prefix+TableActivityExec, fromAVItem(found))
	return a, st.undecoded.Check(err)
}
