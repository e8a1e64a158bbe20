// Package inbox declares what the Simple Lambda API keeps in a store
// besides what the state.Store keeps: the requests and events clients
// insert, the outcomes processors record on them, the registered
// workflows, and the one write that decides an event. simpleapi/dynamoinbox
// and simpleapi/sqliteinbox keep it in each backend's tables. Register and
// Request are what the operator's commands do with it.
//
// The API (docs/contract.md#the-simple-lambda-api): a client inserts a workflow_request item to start a
// workflow, or an activity_event item to move an activity, and a processor
// reading the tables' streams (package simpleapi) does the rest with the
// Full Logic API's code.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/codec"
)

// Inbox holds the Simple Lambda API's items. As with the state.Store, its
// listings (Events, Registrations) skip the items they cannot decode and
// name them in a *state.SkippedError beside the others.
type Inbox interface {
	// PutRequest inserts a request; a *state.ExistsError if its ID is taken.
	PutRequest(ctx context.Context, r *state.WorkflowRequest) error
	// RecordRequest records a processor's outcome on a request, and the
	// execution it started (if any). Only the first outcome is kept: a
	// later one returns a *state.ConflictError naming the first.
	RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o state.Outcome) error

	// PutEvent inserts an event; a *state.ExistsError if its ID is taken.
	PutEvent(ctx context.Context, e *state.ActivityEvent) error
	// GetEvent reads an event (strongly consistent).
	GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error)
	// Events lists an activity's events written at or after from (the
	// zero time: all), by state.EventCursor, through an index: eventually
	// consistent. An event that cannot be decoded is listed, as far as
	// it was read, only once a processor recorded an outcome on it.
	Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error)
	// RecordEvent records an outcome on an event without touching its
	// activity: for events with no activity to decide on. Only the first
	// outcome is kept, as with RecordRequest.
	RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error
	// Decide makes the activity write c the decision on one event (see
	// Step), in one atomic write, and returns the activity as written.
	// When the activity refuses c or its cursor is not step.Prev, it
	// returns the *state.ConflictError (Kind "activity") or
	// *state.NotFoundError UpdateActivity would; when the event has an
	// outcome already or is gone, one of Kind "activity event", and
	// nothing is written.
	Decide(ctx context.Context, key state.ActivityKey, c state.ActivityChange, step Step) (*state.ActivityExec, error)
	// FindActivity reads an activity by its ID alone, the hash key of
	// its table (strongly consistent), for an event that does not name
	// its workflow (the base contract's shape); state.ErrNotFound if there is none.
	FindActivity(ctx context.Context, activityExecID string) (*state.ActivityExec, error)

	// Register writes (or replaces) a workflow's registration.
	Register(ctx context.Context, r *state.WorkflowLambda) error
	// Registration reads one; state.ErrNotFound if the workflow is not
	// registered.
	Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error)
	// Registrations lists every registered workflow, by name.
	Registrations(ctx context.Context) ([]*state.WorkflowLambda, error)
}

// CursorAttr is the activity item's attribute that holds its event cursor
// (state.ActivityExec.EventCursor).
const CursorAttr = "event_cursor"

// Step is the decision on one event. It moves the activity's event cursor
// from Prev to Next, and the write fails unless the cursor is Prev, so
// that each decision is made on the activity as the decider read it. When
// Outcome is set, it is recorded on the event in the same atomic write,
// which fails unless the event has no outcome yet, so each event is
// decided once.
type Step struct {
	Prev    string // the cursor the activity must hold ("" : none yet)
	Next    string // the cursor after the decision; it sorts after Prev
	EventID string // the event the outcome is recorded on
	Outcome *state.Outcome
}

// Check says what is wrong with a step, if anything.
func (s Step) Check() error {
	if s.Next == "" || s.Next <= s.Prev {
		return fmt.Errorf("event cursor %q does not come after %q", s.Next, s.Prev)
	}
	if s.Outcome != nil && (s.EventID == "" || !s.Outcome.Processed()) {
		return errors.New("an event outcome needs the event's ID and a result")
	}
	return nil
}

// Put is how an Inbox puts a new item, whatever its store: put writes it
// unless its key is taken, and then returns what the item there holds (an
// empty, non-nil item if it could not be read).
type Put func() (taken codec.Item, err error)

// PutRequest checks a request, puts it, and says why it was not put: a
// *state.ExistsError naming the execution the taken request started, if
// any.
func PutRequest(r *state.WorkflowRequest, put Put) error {
	if r.WorkflowRequestID == "" || r.WorkflowName == "" {
		return errors.New("put request: it needs an ID and a workflow name")
	}
	old, err := put()
	if err != nil {
		return fmt.Errorf("put request %s: %w", r.WorkflowRequestID, err)
	}
	if old != nil {
		e := &state.ExistsError{What: "workflow request " + r.WorkflowRequestID}
		if v, ok := old["workflow_exec_id"].(codec.S); ok {
			e.WorkflowExecID = string(v)
		}
		return e
	}
	return nil
}

// PutEvent checks an event, puts it, and says why it was not put.
func PutEvent(e *state.ActivityEvent, put Put) error {
	if e.ActivityEventID == "" || e.ActivityExecID == "" {
		return errors.New("put event: it needs an ID and an activity")
	}
	old, err := put()
	if err != nil {
		return fmt.Errorf("put event %s: %w", e.ActivityEventID, err)
	}
	if old != nil {
		return &state.ExistsError{What: "activity event " + e.ActivityEventID}
	}
	return nil
}
