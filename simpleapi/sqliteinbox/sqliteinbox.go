// Package sqliteinbox keeps the Simple Lambda API's items (requests,
// events, registrations) in an SQLite store's tables: the inbox.Inbox on
// SQLite, through state/sqlite's extension points. SQLite has no streams,
// so no processor reads them there; the store keeps them so that the API's
// clients and the processor's logic behave alike on both stores.
package sqliteinbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/codec"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// Inbox is the inbox.Inbox on an SQLite store.
type Inbox struct {
	st     *sqlite.Store
	prefix string
}

var _ inbox.Inbox = (*Inbox)(nil)

// New returns the inbox kept in st's tables.
func New(st *sqlite.Store) *Inbox { return &Inbox{st: st, prefix: st.Prefix()} }

// PutRequest implements inbox.Inbox.
func (st *Inbox) PutRequest(ctx context.Context, r *state.WorkflowRequest) error {
	return inbox.PutRequest(r, func() (codec.Item, error) {
		return st.putNewMarked(ctx, "workflow_request", codec.EncodeRequest(r), true, r.WorkflowRequestID, r.WorkflowName)
	})
}

// PutEvent implements inbox.Inbox.
func (st *Inbox) PutEvent(ctx context.Context, e *state.ActivityEvent) error {
	return inbox.PutEvent(e, func() (codec.Item, error) {
		return st.putNew(ctx, "activity_event", codec.EncodeEvent(e), e.ActivityEventID, e.ActivityExecID)
	})
}

// putNew writes an item unless its key exists; then it returns the item
// that is there.
func (st *Inbox) putNew(ctx context.Context, base string, it codec.Item, key ...string) (old codec.Item, err error) {
	return st.putNewMarked(ctx, base, it, false, key...)
}

// putNewMarked is putNew, which also marks the item pending (see
// PendingRequests) when mark is set and it writes the item.
func (st *Inbox) putNewMarked(ctx context.Context, base string, it codec.Item, mark bool, key ...string) (old codec.Item, err error) {
	err = st.st.Do(ctx, func(tx *sqlite.Tx) error {
		cur, err := tx.Get(base, key...)
		if err != nil {
			return err
		}
		if cur != nil {
			old = cur
			return nil
		}
		if err := tx.Put(base, it); err != nil || !mark {
			return err
		}
		return tx.Mark(base, key...)
	})
	return old, err
}

// RecordRequest implements inbox.Inbox.
func (st *Inbox) RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o state.Outcome) error {
	set := codec.OutcomeItem(o)
	if workflowExecID != "" {
		set["workflow_exec_id"] = codec.S(workflowExecID)
	}
	return st.st.Do(ctx, func(tx *sqlite.Tx) error {
		return recordOutcome(tx, "workflow_request", "workflow request", set, id, workflowName)
	})
}

// RecordEvent implements inbox.Inbox.
func (st *Inbox) RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error {
	return st.st.Do(ctx, func(tx *sqlite.Tx) error {
		return recordOutcome(tx, "activity_event", "activity event", codec.OutcomeItem(o), id, activityExecID)
	})
}

// recordOutcome sets the outcome attributes of an item that has none yet.
func recordOutcome(tx *sqlite.Tx, base, kind string, set codec.Item, key ...string) error {
	if _, ok := set["outcome"]; !ok {
		return fmt.Errorf("record the outcome of %s %s: no result given", kind, key[0])
	}
	cur, err := tx.Get(base, key...)
	if err != nil {
		return err
	}
	if cur == nil {
		return &state.NotFoundError{Kind: kind, ID: key[0]}
	}
	if _, ok := cur["outcome"]; ok {
		got, _ := cur["outcome"].(codec.S)
		return &state.ConflictError{Kind: kind, ID: key[0], Want: "no outcome yet", State: string(got)}
	}
	codec.Update{Set: set}.Apply(cur)
	return tx.Put(base, cur)
}

// GetEvent implements inbox.Inbox.
func (st *Inbox) GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error) {
	it, err := st.st.Get(ctx, "activity_event", id, activityExecID)
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "activity event", ID: id}
	}
	e, err := codec.DecodeEvent(st.prefix+"activity_event", it)
	return e, st.st.Undecoded().Check(err)
}

// Events implements inbox.Inbox. An event that cannot be decoded is left
// out and named in a *state.SkippedError, unless it has an outcome: a
// rejected malformed event, which whimbrel status shows.
func (st *Inbox) Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error) {
	skips := st.st.Undecoded().NewSkips()
	its, err := st.st.Items(ctx, "activity_event", skips, `WHERE activity_exec_id = ?`, activityExecID)
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", activityExecID, err)
	}
	var out []*state.ActivityEvent
	for _, r := range its {
		e, err := codec.DecodeEvent(st.prefix+"activity_event", r.Item)
		if err != nil && e != nil && e.Outcome.Processed() {
			out = append(out, e) // a rejected malformed event, for whimbrel status
			continue
		}
		if err != nil {
			_ = skips.Add(r.Decoded(err))
			continue
		}
		if e.When.Before(from) {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return state.EventCursor(out[i]) < state.EventCursor(out[j]) })
	return out, skips.Err()
}

// Register implements inbox.Inbox.
func (st *Inbox) Register(ctx context.Context, r *state.WorkflowLambda) error {
	if err := state.CheckName(r.WorkflowName); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if err := st.st.Do(ctx, func(tx *sqlite.Tx) error { return tx.Put("workflow_lambda", codec.EncodeRegistration(r)) }); err != nil {
		return fmt.Errorf("register %s: %w", r.WorkflowName, err)
	}
	return nil
}

// Registration implements inbox.Inbox.
func (st *Inbox) Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error) {
	it, err := st.st.Get(ctx, "workflow_lambda", workflowName)
	if err != nil {
		return nil, fmt.Errorf("read the registration of %s: %w", workflowName, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "registered workflow", ID: workflowName}
	}
	r, err := codec.DecodeRegistration(st.prefix+"workflow_lambda", it)
	return r, st.st.Undecoded().Check(err)
}

// Registrations implements inbox.Inbox.
func (st *Inbox) Registrations(ctx context.Context) ([]*state.WorkflowLambda, error) {
	skips := st.st.Undecoded().NewSkips()
	its, err := st.st.Items(ctx, "workflow_lambda", skips, `ORDER BY workflow_name`)
	if err != nil {
		return nil, fmt.Errorf("list registered workflows: %w", err)
	}
	var out []*state.WorkflowLambda
	for _, r := range its {
		reg, err := codec.DecodeRegistration(st.prefix+"workflow_lambda", r.Item)
		if err != nil {
			_ = skips.Add(r.Decoded(err))
			continue
		}
		out = append(out, reg)
	}
	return out, skips.Err()
}

// Decide implements inbox.Inbox: the activity write moves its cursor, and
// the outcome is recorded on the event, in one transaction.
func (st *Inbox) Decide(ctx context.Context, key state.ActivityKey, c state.ActivityChange, step inbox.Step) (*state.ActivityExec, error) {
	if err := step.Check(); err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	swap := &codec.Swap{Attr: inbox.CursorAttr, Old: step.Prev, New: step.Next}
	var also func(*sqlite.Tx) error
	if o := step.Outcome; o != nil {
		also = func(tx *sqlite.Tx) error {
			return recordOutcome(tx, "activity_event", "activity event", codec.OutcomeItem(*o), step.EventID, key.ActivityExecID)
		}
	}
	return st.st.UpdateActivityWith(ctx, key, c, swap, also)
}

// FindActivity implements inbox.Inbox.
func (st *Inbox) FindActivity(ctx context.Context, activityExecID string) (*state.ActivityExec, error) {
	skips := st.st.Undecoded().NewSkips()
	its, err := st.st.Items(ctx, "activity_exec", skips, `WHERE activity_exec_id = ? LIMIT 1`, activityExecID)
	if err == nil {
		err = skips.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("find activity %s: %w", activityExecID, err)
	}
	if len(its) == 0 {
		return nil, &state.NotFoundError{Kind: "activity", ID: activityExecID}
	}
	a, err := codec.DecodeActivity(st.prefix+"activity_exec", its[0].Item)
	return a, st.st.Undecoded().Check(its[0].Decoded(err))
}
