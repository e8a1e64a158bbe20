package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Notification is what Status shows of one delivery of an execution's
// notifications (docs/notifications.md), or of its deadline.
type Notification struct {
	ID         string                  `json:"notification_id"`
	Event      string                  `json:"event,omitempty"`
	Target     string                  `json:"target,omitempty"` // where it goes: a webhook's host, or an EventBridge bus
	State      state.NotificationState `json:"delivery_state"`
	DeliveryID string                  `json:"delivery_id,omitempty"`
	Attempts   int                     `json:"attempts,omitempty"`
	LastError  string                  `json:"last_error,omitempty"`
	Delivered  *time.Time              `json:"delivered_time,omitempty"`
	NextTry    *time.Time              `json:"next_try,omitempty"`
	Deadline   *time.Time              `json:"deadline,omitempty"` // the watch's
}

// notificationsOf lists an execution's notifications, when the store
// keeps them; failing to list them does not fail the status.
func notificationsOf(ctx context.Context, st workflow.Reader, id string) []Notification {
	ns, ok := st.(state.Notifications)
	if !ok {
		return nil
	}
	items, err := ns.NotificationsOf(ctx, id)
	if _, err := state.Skipped(err); err != nil {
		return nil
	}
	var out []Notification
	for _, n := range items {
		v := Notification{ID: n.ID, Event: n.Event, Target: targetOf(n.Target), State: n.State, DeliveryID: n.DeliveryID,
			Attempts: n.Attempts, LastError: n.LastError, Delivered: timePtr(n.Delivered)}
		if n.State == state.NotificationPending {
			v.NextTry = timePtr(n.Due)
		}
		if n.ID == state.WatchID {
			if n.Deadline.IsZero() {
				continue // a watch without a deadline says nothing to people
			}
			v.Event, v.Deadline = "deadline", timePtr(n.Deadline)
			if n.DeadlineFired {
				v.Event = "deadline (missed)"
			}
		}
		out = append(out, v)
	}
	return out
}

// targetOf says where a delivery goes without what may be a secret: a
// webhook's URL often carries its token in the path, so only its host is
// shown.
func targetOf(raw string) string {
	var n definition.Notify
	if json.Unmarshal([]byte(raw), &n) != nil {
		return ""
	}
	switch {
	case n.Webhook != nil:
		if u, err := url.Parse(n.Webhook.URL); err == nil {
			return "webhook " + u.Host
		}
		return "webhook"
	case n.EventBridge != nil:
		return "eventbridge " + n.EventBridge.Bus
	}
	return ""
}

// writeNotifications writes the notifications for people, each on a line.
func (s *Status) writeNotifications(w io.Writer) {
	if len(s.Notifications) == 0 {
		return
	}
	fmt.Fprintf(w, "notifications\n")
	for _, n := range s.Notifications {
		line := fmt.Sprintf("  %-20s %-14s %s", inert.String(n.Event), n.State, inert.String(n.Target))
		if n.Deadline != nil {
			line = fmt.Sprintf("  %-20s %s UTC", inert.String(n.Event), clock(n.Deadline))
		}
		if n.Attempts > 0 {
			line += fmt.Sprintf(", %d attempt(s)", n.Attempts)
		}
		if n.Delivered != nil {
			line += ", delivered " + clock(n.Delivered) + " UTC"
		}
		if n.NextTry != nil && n.Attempts > 0 {
			line += ", next try " + clock(n.NextTry) + " UTC"
		}
		fmt.Fprintln(w, line)
		if n.LastError != "" && n.State != state.NotificationDelivered {
			fmt.Fprintf(w, "    last error: %s\n", inert.String(n.LastError))
		}
	}
}
