package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Notifications: state.Notifications on SQLite, with the same items and
// conditions as on DynamoDB.

var _ state.Notifications = (*Store)(nil)

// notificationTable is the notification table; tables lists it with the
// others. Its due index is (due_shard, due_epoch): only items with work to
// do have a shard.
var notificationTable = table{base: "notification", keys: []string{"workflow_exec_id", "notification_id"},
	derived: []string{"due_shard", "due_epoch"}, indexes: [][]string{{"due_shard", "due_epoch"}}}

// PutNotifications implements state.Notifications, in one transaction.
func (st *Store) PutNotifications(ctx context.Context, ns []*state.Notification) (int, error) {
	wrote := 0
	err := st.tx(ctx, func(tx *sql.Tx) error {
		wrote = 0
		for _, n := range ns {
			cur, err := st.get(ctx, tx, "notification", n.WorkflowExecID, n.ID)
			if err != nil {
				return err
			}
			if cur != nil {
				continue // written before
			}
			if err := st.put(ctx, tx, "notification", attr.EncodeNotification(n)); err != nil {
				return err
			}
			wrote++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("put notifications: %w", err)
	}
	return wrote, nil
}

// UpdateNotification implements state.Notifications.
func (st *Store) UpdateNotification(ctx context.Context, n *state.Notification, prev int) error {
	next := *n
	next.Version = prev + 1
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, "notification", n.WorkflowExecID, n.ID)
		if err != nil {
			return err
		}
		if cur == nil || attr.NotificationVersion(cur) != prev {
			got := "absent"
			if cur != nil {
				got = fmt.Sprintf("at version %d", attr.NotificationVersion(cur))
			}
			return &state.ConflictError{Kind: "notification", ID: n.WorkflowExecID + " " + n.ID, Want: fmt.Sprintf("version %d", prev), State: got}
		}
		return st.put(ctx, tx, "notification", attr.EncodeNotification(&next))
	})
	var ce *state.ConflictError
	switch {
	case errors.As(err, &ce):
		return err
	case err != nil:
		return fmt.Errorf("update notification %s of %s: %w", n.ID, n.WorkflowExecID, err)
	}
	n.Version = next.Version
	return nil
}

// GetNotification implements state.Notifications.
func (st *Store) GetNotification(ctx context.Context, workflowExecID, id string) (*state.Notification, error) {
	it, err := st.get(ctx, st.db, "notification", workflowExecID, id)
	if err != nil {
		return nil, fmt.Errorf("get notification %s of %s: %w", id, workflowExecID, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "notification", ID: workflowExecID + " " + id}
	}
	return attr.DecodeNotification(st.prefix+"notification", it)
}

// NotificationsOf implements state.Notifications. An item that cannot be
// decoded is left out and named in a *state.SkippedError.
func (st *Store) NotificationsOf(ctx context.Context, workflowExecID string) ([]*state.Notification, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "notification", skips, `WHERE workflow_exec_id = ? ORDER BY notification_id`, workflowExecID)
	if err != nil {
		return nil, fmt.Errorf("list the notifications of %s: %w", workflowExecID, err)
	}
	var out []*state.Notification
	for _, r := range its {
		n, err := attr.DecodeNotification(st.prefix+"notification", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, n)
	}
	return out, skips.Err()
}

// DueNotifications implements state.Notifications, through the due index.
func (st *Store) DueNotifications(ctx context.Context, now time.Time, limit int) ([]state.NotificationKey, error) {
	q := fmt.Sprintf(`SELECT workflow_exec_id, notification_id FROM %s WHERE due_shard IS NOT NULL AND due_epoch <= ? ORDER BY due_epoch`, st.name("notification"))
	args := []any{float64(now.UnixMilli()) / 1000}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := st.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list due notifications: %w", st.translate(err))
	}
	defer rows.Close()
	var out []state.NotificationKey
	for rows.Next() {
		var k state.NotificationKey
		if err := rows.Scan(&k.WorkflowExecID, &k.ID); err != nil {
			return nil, fmt.Errorf("list due notifications: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list due notifications: %w", err)
	}
	return out, nil
}
