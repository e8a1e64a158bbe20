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

// GetActivity implements state.Store.
func (st *Store) GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error) {
	m, err := st.get(ctx, "GetActivity", TableActivityExec, toAVItem(attr.ActivityKey(key)))
	if err != nil {
		return nil, fmt.Errorf("get activity %s: %w", key.ActivityExecID, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	st.restamp(ctx, activityStamps, m)
	v, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	return v, st.undecoded.Check(err)
}

// Activities implements state.Store.
func (st *Store) Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error) {
	keys, err := st.activityKeys(ctx, workflowExecID)
	if err != nil {
		return nil, fmt.Errorf("list activities of %s: %w", workflowExecID, err)
	}
	var out []*state.ActivityExec
	skips := st.undecoded.NewSkips()
	err = st.batchGet(ctx, TableActivityExec, keys, func(m item) error {
		it := fromAVItem(m)
		st.restamp(ctx, activityStamps, it)
		a, err := attr.DecodeActivity(st.prefix+TableActivityExec, it)
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read activities of %s: %w", workflowExecID, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ActivityExecID < out[j].ActivityExecID })
	return out, skips.Err()
}

// activityKeys lists the keys of a workflow's activities through the
// workflow index.
func (st *Store) activityKeys(ctx context.Context, workflowExecID string) ([]item, error) {
	var keys []item
	err := st.query(ctx, "Activities", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
		IndexName:                 aws.String(indexWorkflow),
		KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": avS(workflowExecID)},
	}, 0, func(m item) error {
		keys = append(keys, item{"activity_exec_id": m["activity_exec_id"], "workflow_exec_id": m["workflow_exec_id"]})
		return nil
	})
	return keys, err
}

// UpdateActivity implements state.Store.
func (st *Store) UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChange(c)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	upd = shardUpdate(key, upd)
	return st.updateActivity(ctx, "UpdateActivity", key, cond, upd)
}

// Heartbeat implements state.Store. It sets two attributes that no index
// projects, and returns nothing on success, so it costs one write unit.
func (st *Store) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	cond, upd := attr.Heartbeat(owner, at)
	expr, err := expressionOf(cond, upd)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", key.ActivityExecID, err)
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           st.table(TableActivityExec),
		Key:                                 toAVItem(attr.ActivityKey(key)),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, nilIfEmpty(ccf.Item))
	case err != nil:
		return fmt.Errorf("heartbeat %s: %w", key.ActivityExecID, err)
	}
	st.report("Heartbeat", reportOne(out.ConsumedCapacity)...)
	return nil
}

// updateActivity makes one conditional write and returns the item as
// written, or the conflict. The write has landed when it returns an item,
// so an attribute it did not need being malformed does not turn it into a
// failure: that is logged, and the item returned as far as it was read.
func (st *Store) updateActivity(ctx context.Context, op string, key state.ActivityKey, cond attr.Cond, upd attr.Update) (*state.ActivityExec, error) {
	m, old, err := st.update(ctx, op, TableActivityExec, toAVItem(attr.ActivityKey(key)), cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if m == nil {
		return nil, attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, old)
	}
	a, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		return a, nil
	}
	return a, err
}

// Expire implements state.Store: one UpdateItem per item, each only if the
// item exists.
func (st *Store) Expire(ctx context.Context, id string, at time.Time) error {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return fmt.Errorf("expire %s: %w", id, err)
	}
	upd := attr.Expire(at)
	type target struct {
		base string
		key  item
		pk   string
	}
	targets := []target{{TableWorkflowExec, workflowKey(id, wf.WorkflowName), "workflow_exec_id"}}
	if wf.WorkflowRequestID != "" {
		targets = append(targets, target{TableWorkflowRequest,
			item{"workflow_request_id": avS(wf.WorkflowRequestID), "workflow_name": avS(wf.WorkflowName)}, "workflow_request_id"})
	}
	for _, q := range []struct{ base, pk, rk string }{
		{TableActivityExec, "activity_exec_id", "workflow_exec_id"},
		{TableActivityDependency, "activity_exec_dependency", "activity_exec_id"},
	} {
		err := st.query(ctx, "Expire", &dynamodb.QueryInput{
			TableName:                 st.table(q.base),
			IndexName:                 aws.String(indexWorkflow),
			KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":w": avS(id)},
		}, 0, func(m item) error {
			targets = append(targets, target{q.base, item{q.pk: m[q.pk], q.rk: m[q.rk]}, q.pk})
			return nil
		})
		if err != nil {
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	// The Simple Lambda API's events of each activity go with it.
	for _, tg := range targets {
		if tg.base != TableActivityExec {
			continue
		}
		err := st.query(ctx, "Expire", &dynamodb.QueryInput{
			TableName:                 st.table(TableActivityEvent),
			IndexName:                 aws.String(indexActivity),
			KeyConditionExpression:    aws.String("activity_exec_id = :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": tg.key["activity_exec_id"]},
			ProjectionExpression:      aws.String("activity_event_id, activity_exec_id"),
		}, 0, func(m item) error {
			targets = append(targets, target{TableActivityEvent, item{"activity_event_id": m["activity_event_id"], "activity_exec_id": m["activity_exec_id"]}, "activity_event_id"})
			return nil
		})
		if err != nil {
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	for _, tg := range targets {
		_, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 st.table(tg.base),
			Key:                       tg.key,
			ConditionExpression:       aws.String("attribute_exists(#k)"),
			UpdateExpression:          aws.String("SET #e = :e"),
			ExpressionAttributeNames:  map[string]string{"#k": tg.pk, "#e": attr.ExpiresAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": toAV(upd.Set[attr.ExpiresAt])},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) { // a vanished item needs no expiry
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	return nil
}
