package state

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// The vocabulary of the Simple Lambda API's items
// (docs/contract.md#the-simple-lambda-api): the
// transitions an activity_event may ask for besides the states, the
// outcomes a processor records on an item, and the order of an activity's
// events. The items are the contract's (items.go) and share the codec; what
// is kept and done with them lives above the core, in package simpleapi.

// TransitionHeartbeat is the transition of an event that reports a
// heartbeat: the activity stays RUNNING and its heartbeat time is the
// event's when.
const TransitionHeartbeat = "HEARTBEAT"

// TransitionCancel is the contract's word for cancelling an activity: it
// becomes CANCELLED, or CANCELLED_RUNNING when it was RUNNING.
const TransitionCancel = "CANCEL"

// The results an Outcome records.
const (
	OutcomeStarted  = "started"  // a request started its execution
	OutcomeApplied  = "applied"  // an event's transition took effect
	OutcomeRejected = "rejected" // nothing was changed; the reason says why
	OutcomeIgnored  = "ignored"  // a manual item: the Full Logic API made its change
)

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

// NewActivityEventID returns a fresh event ID of the contract's form
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
