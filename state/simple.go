package state

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// The Simple Lambda API (seed 001): a client inserts a workflow_request item
// to start a workflow, or an activity_event item to move an activity, and a
// processor reading the tables' streams does the rest with the Full Logic
// API's code. Inbox is what the processor and those clients need of a
// store besides the Store.

// Inbox holds the Simple Lambda API's items: the write-once requests and
// events clients insert, the outcomes processors record on them, and the
// registered workflows. As with the Store, its listings (Events,
// Registrations) skip the items they cannot decode and name them in a
// *SkippedError beside the others.
type Inbox interface {
	// PutRequest inserts a request; an *ExistsError if its ID is taken.
	PutRequest(ctx context.Context, r *WorkflowRequest) error
	// RecordRequest records a processor's outcome on a request, and the
	// execution it started (if any). Only the first outcome is kept: a
	// later one returns a *ConflictError naming the first.
	RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o Outcome) error

	// PutEvent inserts an event; an *ExistsError if its ID is taken.
	PutEvent(ctx context.Context, e *ActivityEvent) error
	// GetEvent reads an event (strongly consistent).
	GetEvent(ctx context.Context, id, activityExecID string) (*ActivityEvent, error)
	// Events lists an activity's events written at or after from (the
	// zero time: all), by EventCursor, through an index: eventually
	// consistent. An event that cannot be decoded is listed, as far as
	// it was read, only once a processor recorded an outcome on it.
	Events(ctx context.Context, activityExecID string, from time.Time) ([]*ActivityEvent, error)
	// RecordEvent records an outcome on an event without touching its
	// activity: for events with no activity to decide on. Only the first
	// outcome is kept, as with RecordRequest.
	RecordEvent(ctx context.Context, id, activityExecID string, o Outcome) error
	// FindActivity reads an activity by its ID alone, the hash key of
	// its table (strongly consistent), for an event that does not name
	// its workflow (seed 000's shape); ErrNotFound if there is none.
	FindActivity(ctx context.Context, activityExecID string) (*ActivityExec, error)

	// Register writes (or replaces) a workflow's registration.
	Register(ctx context.Context, r *WorkflowLambda) error
	// Registration reads one; ErrNotFound if the workflow is not registered.
	Registration(ctx context.Context, workflowName string) (*WorkflowLambda, error)
	// Registrations lists every registered workflow, by name.
	Registrations(ctx context.Context) ([]*WorkflowLambda, error)
}

// TransitionHeartbeat is the transition of an event that reports a
// heartbeat: the activity stays RUNNING and its heartbeat time is the
// event's when.
const TransitionHeartbeat = "HEARTBEAT"

// TransitionCancel is seed 001's word for cancelling an activity: it
// becomes CANCELLED, or CANCELLED_RUNNING when it was RUNNING.
const TransitionCancel = "CANCEL"

// The results an Outcome records.
const (
	OutcomeStarted  = "started"  // a request started its execution
	OutcomeApplied  = "applied"  // an event's transition took effect
	OutcomeRejected = "rejected" // nothing was changed; the reason says why
	OutcomeIgnored  = "ignored"  // a manual item: the Full Logic API made its change
)

// EventStep makes an activity write the decision on one event. The write
// moves the activity's event cursor from Prev to Next and fails (a
// *ConflictError) unless the cursor is Prev, so that each decision is
// made on the activity as the decider read it. When Outcome is set, it is
// recorded on the event in the same atomic write, which fails unless the
// event has no outcome yet, so each event is decided once.
type EventStep struct {
	Prev    string // the cursor the activity must hold ("" : none yet)
	Next    string // the cursor after the decision; it sorts after Prev
	EventID string // the event the outcome is recorded on
	Outcome *Outcome
}

// EventCursor orders an activity's events by their when, then their IDs,
// as strings: the order Events lists them in. (Which order they take
// effect in is the processor's to decide.)
func EventCursor(e *ActivityEvent) string {
	return fmt.Sprintf("%015d/%s", max(e.When.UnixMilli(), 0), e.ActivityEventID)
}

// CursorTime is the when of the event a cursor names (the zero time for
// no cursor).
func CursorTime(cursor string) time.Time {
	if len(cursor) < 15 {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(cursor[:15], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// NewActivityEventID returns a fresh event ID of the seed's form
// `(activity_exec_id)::(uuid)`.
func NewActivityEventID(activityExecID string) string {
	return activityExecID + idSeparator + uuid.NewString()
}

// ActivityEventIDFor derives an event ID from what the event means, so that
// a client repeating a write whose answer it lost writes the same event.
func ActivityEventIDFor(activityExecID, meaning string) string {
	return activityExecID + idSeparator + uuid.NewSHA1(namespace, []byte("event/"+activityExecID+"/"+meaning)).String()
}

// Processed reports whether an outcome has been recorded.
func (o Outcome) Processed() bool { return o.Result != "" }

// Rejected returns a rejection outcome with its reason, now.
func Rejected(format string, args ...any) Outcome {
	return Outcome{Result: OutcomeRejected, Reason: fmt.Sprintf(format, args...), At: Truncate(time.Now())}
}
