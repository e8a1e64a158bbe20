package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Notifications: state.Notifications on DynamoDB.

// TableNotification holds each execution's watch item and its
// deliveries, under the execution's ID.
const TableNotification = "notification"

// indexNotifyDue (notification): due_shard + due_epoch, keys only. Only an
// item with work to do has due_shard, so the index is sparse: a monitor's
// query reads what is due and nothing of history.
const indexNotifyDue = "due-index"

var _ state.Notifications = (*Store)(nil)

// notificationTable is the notification table's definition; tableDefs
// lists it with the others, and Install creates it with them.
var notificationTable = tableDef{base: TableNotification, ttl: true,
	description: "notifications: each execution's watch (its deadline) and the deliveries of its ending",
	hash:        s("workflow_exec_id"), rng: ps("notification_id"),
	indexes: []index{
		{name: indexNotifyDue, hash: s("due_shard"), rng: pn("due_epoch"), projection: types.ProjectionTypeKeysOnly},
	}}

func notificationKey(k state.NotificationKey) item {
	return item{"workflow_exec_id": avS(k.WorkflowExecID), "notification_id": avS(k.ID)}
}

// PutNotifications implements state.Notifications: one conditional put
// per item, so that an item already written is left alone.
func (st *Store) PutNotifications(ctx context.Context, ns []*state.Notification) (int, error) {
	wrote := 0
	for _, n := range ns {
		out, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: st.table(TableNotification), Item: toAVItem(attr.EncodeNotification(n)),
			ConditionExpression:    aws.String("attribute_not_exists(notification_id)"),
			ReturnConsumedCapacity: st.returnCapacity(),
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			continue // written before: by this participant, or another
		case err != nil:
			return wrote, fmt.Errorf("put notification %s of %s: %w", n.ID, n.WorkflowExecID, err)
		}
		st.report("PutNotifications", reportOne(out.ConsumedCapacity)...)
		wrote++
	}
	return wrote, nil
}

// UpdateNotification implements state.Notifications.
func (st *Store) UpdateNotification(ctx context.Context, n *state.Notification, prev int) error {
	next := *n
	next.Version = prev + 1
	out, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: st.table(TableNotification), Item: toAVItem(attr.EncodeNotification(&next)),
		ConditionExpression:                 aws.String("version = :v"),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":v": avN(strconv.Itoa(prev))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return notificationConflict(n.NotificationKey, prev, nilIfEmpty(ccf.Item))
	case err != nil:
		return fmt.Errorf("update notification %s of %s: %w", n.ID, n.WorkflowExecID, err)
	}
	st.report("UpdateNotification", reportOne(out.ConsumedCapacity)...)
	n.Version = next.Version
	return nil
}

// notificationConflict says what the item held instead of version prev.
func notificationConflict(k state.NotificationKey, prev int, old attr.Item) error {
	got := "absent"
	if old != nil {
		got = fmt.Sprintf("at version %d", attr.NotificationVersion(old))
	}
	return &state.ConflictError{Kind: "notification", ID: k.WorkflowExecID + " " + k.ID, Want: fmt.Sprintf("version %d", prev), State: got}
}

// GetNotification implements state.Notifications.
func (st *Store) GetNotification(ctx context.Context, workflowExecID, id string) (*state.Notification, error) {
	k := state.NotificationKey{WorkflowExecID: workflowExecID, ID: id}
	m, err := st.get(ctx, "GetNotification", TableNotification, notificationKey(k))
	if err != nil {
		return nil, fmt.Errorf("get notification %s of %s: %w", id, workflowExecID, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "notification", ID: workflowExecID + " " + id}
	}
	return attr.DecodeNotification(st.prefix+TableNotification, m)
}

// NotificationsOf implements state.Notifications: one query of the
// execution's partition. An item that cannot be decoded is left out and
// named in a *state.SkippedError.
func (st *Store) NotificationsOf(ctx context.Context, workflowExecID string) ([]*state.Notification, error) {
	var out []*state.Notification
	skips := st.undecoded.NewSkips()
	in := &dynamodb.QueryInput{
		TableName: st.table(TableNotification), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": avS(workflowExecID)},
	}
	err := st.query(ctx, "NotificationsOf", in, 0, func(m item) error {
		n, err := attr.DecodeNotification(st.prefix+TableNotification, fromAVItem(m))
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the notifications of %s: %w", workflowExecID, err)
	}
	return out, skips.Err()
}

// DueNotifications implements state.Notifications: one query per shard
// of the sparse due index.
func (st *Store) DueNotifications(ctx context.Context, now time.Time, limit int) ([]state.NotificationKey, error) {
	type due struct {
		k state.NotificationKey
		t string
	}
	var all []due
	for i := 0; i < state.NotificationShards; i++ {
		in := &dynamodb.QueryInput{
			TableName:                 st.table(TableNotification),
			IndexName:                 aws.String(indexNotifyDue),
			KeyConditionExpression:    aws.String("due_shard = :s AND due_epoch <= :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(attr.ShardName(i)), ":t": toAV(attr.Epoch(now))},
		}
		err := st.query(ctx, "DueNotifications", in, limit, func(m item) error {
			w, _ := m["workflow_exec_id"].(*types.AttributeValueMemberS)
			id, _ := m["notification_id"].(*types.AttributeValueMemberS)
			t, _ := m["due_epoch"].(*types.AttributeValueMemberN)
			if w != nil && id != nil && t != nil {
				all = append(all, due{state.NotificationKey{WorkflowExecID: w.Value, ID: id.Value}, t.Value})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list due notifications: %w", err)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, _ := strconv.ParseFloat(all[i].t, 64)
		b, _ := strconv.ParseFloat(all[j].t, 64)
		return a < b
	})
	var out []state.NotificationKey
	for _, d := range all {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, d.k)
	}
	return out, nil
}
