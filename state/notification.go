package state

import (
	"context"
	"time"
)

// Notifications tell people that an execution ended (or missed its
// deadline). The participant that records an execution's ending writes
// one delivery item per notify entry of its definition that asks for the
// outcome; any monitor delivers it, at least once, retrying with backoff.
// A watch item per execution, written when it starts, carries its deadline
// and lets a monitor finish what a participant that died after recording
// the ending left undone. Both kinds are found through a sparse due
// index holding only the items due for work, so that neither delivery
// nor the deadline ever scans history (docs/contract.md#notification).
// Package notify holds the logic; this is what it needs of a store.
type Notifications interface {
	// PutNotifications writes each item whose key no item has yet, and
	// leaves an existing one as it is: a participant that writes the same
	// items again (it died half-way, or another one raced it) changes
	// nothing. It reports how many it wrote.
	PutNotifications(ctx context.Context, ns []*Notification) (int, error)
	// UpdateNotification writes n if the stored item's version is prev,
	// with n.Version = prev+1; a stale prev returns a *ConflictError and
	// writes nothing.
	UpdateNotification(ctx context.Context, n *Notification, prev int) error
	// GetNotification reads one item (strongly consistent); ErrNotFound
	// if there is none.
	GetNotification(ctx context.Context, workflowExecID, id string) (*Notification, error)
	// NotificationsOf lists the items of one execution, by ID.
	NotificationsOf(ctx context.Context, workflowExecID string) ([]*Notification, error)
	// DueNotifications lists the keys of the items due at or before now,
	// oldest first, at most limit (0: no limit), through the due index.
	// Index reads are eventually consistent: read the item before acting
	// on it.
	DueNotifications(ctx context.Context, now time.Time, limit int) ([]NotificationKey, error)
}

// NotificationShards is how many index partitions the due items are
// spread over; a monitor queries each.
const NotificationShards = 4

// NotificationKey is the key of a notification item.
type NotificationKey struct {
	WorkflowExecID string // workflow_exec_id
	ID             string // notification_id: WatchID, or EVENT/INDEX
}

// WatchID is the notification_id of an execution's watch item.
const WatchID = "watch"

// NotificationState is where a notification item is.
type NotificationState string

// The states of a notification item. A delivery is PENDING until a
// receiver takes it (DELIVERED) or its retries run out (UNDELIVERABLE);
// a watch is WATCHING until its execution ended and its notifications
// were written (DONE).
const (
	NotificationPending       NotificationState = "PENDING"
	NotificationDelivered     NotificationState = "DELIVERED"
	NotificationUndeliverable NotificationState = "UNDELIVERABLE"
	NotificationWatching      NotificationState = "WATCHING"
	NotificationDone          NotificationState = "DONE"
)

// Notification is one notification item: a delivery, or an execution's
// watch.
type Notification struct {
	NotificationKey
	WorkflowName string            // workflow_name
	State        NotificationState // delivery_state
	// Event is what happened: completed, failed, timed_out, cancelled or
	// deadline_missed (a delivery).
	Event string // event
	// Entry is the place of the definition's notify entry the delivery
	// goes to (a delivery).
	Entry int // entry
	// DeliveryID is the stable ID every try carries, for receivers to
	// drop duplicates.
	DeliveryID string // delivery_id
	// Body is what is delivered: a JSON object (a delivery).
	Body string // body
	// Due is when a monitor next works on the item (zero: never; the due
	// index holds only items with a due time).
	Due       time.Time // due_time, due_epoch, due_shard
	Attempts  int       // attempts
	LastError string    // last_error
	Created   time.Time // created_time
	Delivered time.Time // delivered_time
	// Deadline is when the execution must have settled (a watch; zero:
	// no deadline); DeadlineFired records that its deadline_missed
	// deliveries were written.
	Deadline      time.Time // deadline_time
	DeadlineFired bool      // deadline_fired
	// Target is the notify entry the delivery goes to, as JSON (a
	// delivery): the definition it came from need not be read again.
	Target string // target
	// Holder is a token of the deliverer that took the delivery for a
	// try, so that one whose write's answer was lost can tell the write
	// was its own.
	Holder string // holder
	// Expires is when the item is deleted (zero: never): its execution's
	// retention, as the execution's own items.
	Expires time.Time // expires_at (epoch seconds)
	Version int       // version: raised by every write
}
