package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/state"
)

// maxError bounds the error text a delivery item keeps.
const maxError = 1000

// deliver tries one delivery: it takes the item first (attempts+1, due
// again after a lease long enough for the try), so that another
// deliverer does not send it at the same time; a deliverer that dies
// while it holds the item leaves it to be tried again when the lease ends.
func (d *Deliverer) deliver(ctx context.Context, n *state.Notification, now time.Time) error {
	if now.Sub(n.Created) >= MaxAge {
		prev := n.Version
		n.State, n.Due = state.NotificationUndeliverable, time.Time{}
		if n.LastError == "" {
			n.LastError = "not delivered within " + MaxAge.String()
		}
		err := d.st.UpdateNotification(ctx, n, prev)
		if err == nil {
			d.tried(n, "undeliverable", "", 0)
		}
		return conflictOr(err, "give up notification "+n.ID+" of "+n.WorkflowExecID)
	}
	prev := n.Version
	first := n.Attempts == 0
	n.Attempts++
	n.Due = now.Add(2*d.cfg.Timeout + 30*time.Second)
	n.Holder = uuid.NewString()
	if err := d.st.UpdateNotification(ctx, n, prev); err != nil {
		if !errors.Is(err, state.ErrConflict) {
			return fmt.Errorf("take notification %s of %s: %w", n.ID, n.WorkflowExecID, err)
		}
		// Taken by another deliverer, or by this one in a write whose
		// answer was lost: the holder says which.
		now, err := d.st.GetNotification(ctx, n.WorkflowExecID, n.ID)
		if err != nil || now.Holder != n.Holder || now.Version != prev+1 {
			return nil
		}
		n.Version = now.Version
	}
	if first && d.cfg.Observer != nil {
		d.cfg.Observer.Written(n.WorkflowName, n.Event)
	}
	code, err := d.send.send(ctx, n)
	after := d.cfg.Now()
	outcome := "delivered"
	prev = n.Version
	if err == nil {
		n.State, n.Due, n.Delivered, n.LastError = state.NotificationDelivered, time.Time{}, after, ""
		d.cfg.Logger.Info("notification delivered", "workflow_exec_id", n.WorkflowExecID, "notification_id", n.ID,
			"delivery_id", n.DeliveryID, "attempts", n.Attempts)
	} else {
		n.LastError = err.Error()
		if len(n.LastError) > maxError {
			n.LastError = n.LastError[:maxError]
		}
		outcome = "failed"
		if after.Sub(n.Created) >= MaxAge {
			n.State, n.Due, outcome = state.NotificationUndeliverable, time.Time{}, "undeliverable"
		} else {
			n.Due = after.Add(d.backoff(n.Attempts))
		}
		d.cfg.Logger.Warn("notification not delivered", "workflow_exec_id", n.WorkflowExecID, "notification_id", n.ID,
			"attempts", n.Attempts, "next", n.Due, "error", err)
	}
	d.tried(n, outcome, code, after.Sub(now))
	// A conflict here means the lease ran out and another deliverer took
	// the item: its record stands.
	return conflictOr(d.st.UpdateNotification(context.WithoutCancel(ctx), n, prev), "record notification "+n.ID+" of "+n.WorkflowExecID)
}

func (d *Deliverer) tried(n *state.Notification, outcome, code string, took time.Duration) {
	if d.cfg.Observer != nil {
		d.cfg.Observer.Tried(n.WorkflowName, n.Event, outcome, code, took)
	}
}
