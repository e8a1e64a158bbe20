package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// The Simple Lambda API's items: state.Inbox on SQLite. SQLite has no
// streams, so no processor reads them here; the store keeps them so that
// the API's clients and the processor's logic behave alike on both stores.

var _ state.Inbox = (*Store)(nil)

// PutRequest implements state.Inbox.
func (st *Store) PutRequest(ctx context.Context, r *state.WorkflowRequest) error {
	if r.WorkflowRequestID == "" || r.WorkflowName == "" {
		return errors.New("put request: it needs an ID and a workflow name")
	}
	old, err := st.putNew(ctx, "workflow_request", attr.EncodeRequest(r), r.WorkflowRequestID, r.WorkflowName)
	if err != nil {
		return fmt.Errorf("put request %s: %w", r.WorkflowRequestID, err)
	}
	if old != nil {
		e := &state.ExistsError{What: "workflow request " + r.WorkflowRequestID}
		if v, ok := old["workflow_exec_id"].(attr.S); ok {
			e.WorkflowExecID = string(v)
		}
		return e
	}
	return nil
}

// PutEvent implements state.Inbox.
func (st *Store) PutEvent(ctx context.Context, e *state.ActivityEvent) error {
	if e.ActivityEventID == "" || e.ActivityExecID == "" {
		return errors.New("put event: it needs an ID and an activity")
	}
	old, err := st.putNew(ctx, "activity_event", attr.EncodeEvent(e), e.ActivityEventID, e.ActivityExecID)
	if err != nil {
		return fmt.Errorf("put event %s: %w", e.ActivityEventID, err)
	}
	if old != nil {
		return &state.ExistsError{What: "activity event " + e.ActivityEventID}
	}
	return nil
}

// putNew writes an item unless its key exists; then it returns the item
// that is there.
func (st *Store) putNew(ctx context.Context, base string, it attr.Item, key ...string) (old attr.Item, err error) {
	err = st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, base, key...)
		if err != nil {
			return err
		}
		if cur != nil {
			old = cur
			return nil
		}
		return st.put(ctx, tx, base, it)
	})
	return old, err
}

// RecordRequest implements state.Inbox.
func (st *Store) RecordRequest(ctx context.Context, id, workflowName, workflowExecID string, o state.Outcome) error {
	set := attr.OutcomeItem(o)
	if workflowExecID != "" {
		set["workflow_exec_id"] = attr.S(workflowExecID)
	}
	return st.tx(ctx, func(tx *sql.Tx) error {
		return st.recordOutcome(ctx, tx, "workflow_request", "workflow request", set, id, workflowName)
	})
}

// RecordEvent implements state.Inbox.
func (st *Store) RecordEvent(ctx context.Context, id, activityExecID string, o state.Outcome) error {
	return st.tx(ctx, func(tx *sql.Tx) error {
		return st.recordOutcome(ctx, tx, "activity_event", "activity event", attr.OutcomeItem(o), id, activityExecID)
	})
}

// recordOutcome sets the outcome attributes of an item that has none yet.
func (st *Store) recordOutcome(ctx context.Context, tx *sql.Tx, base, kind string, set attr.Item, key ...string) error {
	if _, ok := set["outcome"]; !ok {
		return fmt.Errorf("record the outcome of %s %s: no result given", kind, key[0])
	}
	cur, err := st.get(ctx, tx, base, key...)
	if err != nil {
		return err
	}
	if cur == nil {
		return &state.NotFoundError{Kind: kind, ID: key[0]}
	}
	if _, ok := cur["outcome"]; ok {
		got, _ := cur["outcome"].(attr.S)
		return &state.ConflictError{Kind: kind, ID: key[0], Want: "no outcome yet", State: string(got)}
	}
	attr.Update{Set: set}.Apply(cur)
	return st.put(ctx, tx, base, cur)
}

// GetEvent implements state.Inbox.
func (st *Store) GetEvent(ctx context.Context, id, activityExecID string) (*state.ActivityEvent, error) {
	it, err := st.get(ctx, st.db, "activity_event", id, activityExecID)
	if err != nil {
		return nil, fmt.Errorf("get event %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "activity event", ID: id}
	}
	e, err := attr.DecodeEvent(st.prefix+"activity_event", it)
	return e, st.undecoded.Check(err)
}

// Events implements state.Inbox. An event that cannot be decoded is left
// out and named in a *state.SkippedError, unless it has an outcome: a
// rejected malformed event, which whimbrel status shows.
func (st *Store) Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_event", skips, `WHERE activity_exec_id = ?`, activityExecID)
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", activityExecID, err)
	}
	var out []*state.ActivityEvent
	for _, r := range its {
		e, err := attr.DecodeEvent(st.prefix+"activity_event", r.it)
		if err != nil && e != nil && e.Outcome.Processed() {
			out = append(out, e) // a rejected malformed event, for whimbrel status
			continue
		}
		if err != nil {
			_ = skips.Add(r.decoded(err))
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

// Register implements state.Inbox.
func (st *Store) Register(ctx context.Context, r *state.WorkflowLambda) error {
	if err := state.CheckName(r.WorkflowName); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if err := st.tx(ctx, func(tx *sql.Tx) error { return st.put(ctx, tx, "workflow_lambda", attr.EncodeRegistration(r)) }); err != nil {
		return fmt.Errorf("register %s: %w", r.WorkflowName, err)
	}
	return nil
}

// Registration implements state.Inbox.
func (st *Store) Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error) {
	it, err := st.get(ctx, st.db, "workflow_lambda", workflowName)
	if err != nil {
		return nil, fmt.Errorf("read the registration of %s: %w", workflowName, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "registered workflow", ID: workflowName}
	}
	r, err := attr.DecodeRegistration(st.prefix+"workflow_lambda", it)
	return r, st.undecoded.Check(err)
}

// Registrations implements state.Inbox.
func (st *Store) Registrations(ctx context.Context) ([]*state.WorkflowLambda, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "workflow_lambda", skips, `ORDER BY workflow_name`)
	if err != nil {
		return nil, fmt.Errorf("list registered workflows: %w", err)
	}
	var out []*state.WorkflowLambda
	for _, r := range its {
		reg, err := attr.DecodeRegistration(st.prefix+"workflow_lambda", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, reg)
	}
	return out, skips.Err()
}

// decideEvent makes an activity write and records the outcome on the event
// it decides, in one transaction.
func (st *Store) decideEvent(ctx context.Context, key state.ActivityKey, cond attr.Cond, upd attr.Update, ev *state.EventStep) (*state.ActivityExec, error) {
	var written attr.Item
	err := st.tx(ctx, func(tx *sql.Tx) error {
		cur, err := st.get(ctx, tx, "activity_exec", activityKey(key)...)
		if err != nil {
			return err
		}
		if cur == nil || !cond.Holds(cur) {
			return attr.Conflict("activity", st.prefix+"activity_exec", key.ActivityExecID, cond, cur)
		}
		if err := st.recordOutcome(ctx, tx, "activity_event", "activity event", attr.OutcomeItem(*ev.Outcome), ev.EventID, key.ActivityExecID); err != nil {
			return err
		}
		next := cur.Clone()
		upd.Apply(next)
		if err := st.put(ctx, tx, "activity_exec", next); err != nil {
			return err
		}
		written = next
		return nil
	})
	if err != nil {
		var ce *state.ConflictError
		var nf *state.NotFoundError
		var ie *state.DecodeError
		if errors.As(err, &ce) || errors.As(err, &nf) || errors.As(err, &ie) {
			return nil, err
		}
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	return st.lenient(written)
}

// FindActivity implements state.Inbox.
func (st *Store) FindActivity(ctx context.Context, activityExecID string) (*state.ActivityExec, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec", skips, `WHERE activity_exec_id = ? LIMIT 1`, activityExecID)
	if err == nil {
		err = skips.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("find activity %s: %w", activityExecID, err)
	}
	if len(its) == 0 {
		return nil, &state.NotFoundError{Kind: "activity", ID: activityExecID}
	}
	a, err := attr.DecodeActivity(st.prefix+"activity_exec", its[0].it)
	return a, st.undecoded.Check(its[0].decoded(err))
}
