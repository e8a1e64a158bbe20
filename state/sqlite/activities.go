package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

func activityKey(k state.ActivityKey) []string { return []string{k.ActivityExecID, k.WorkflowExecID} }

// GetActivity implements state.Store.
func (st *Store) GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error) {
	it, err := st.get(ctx, st.db, "activity_exec", activityKey(key)...)
	if err != nil {
		return nil, fmt.Errorf("get activity %s: %w", key.ActivityExecID, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	a, err := attr.DecodeActivity(st.prefix+"activity_exec", it)
	return a, st.undecoded.Check(keyed(err, activityKey(key)))
}

// Activities implements state.Store.
func (st *Store) Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec", skips, `WHERE workflow_exec_id = ? ORDER BY activity_exec_id`, workflowExecID)
	if err != nil {
		return nil, fmt.Errorf("list activities of %s: %w", workflowExecID, err)
	}
	out := make([]*state.ActivityExec, 0, len(its))
	for _, r := range its {
		a, err := attr.DecodeActivity(st.prefix+"activity_exec", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, a)
	}
	return out, skips.Err()
}

// AnyLive reports whether any activity of the workflow is not terminal,
// through the index on workflow_exec_id and state, without reading the
// items: settling after each of a workflow's activities ends then costs
// the same however many it has. An item whose state is not one of the
// contract's counts as live, as listing it would not settle either.
func (st *Store) AnyLive(ctx context.Context, workflowExecID string) (bool, error) {
	terminal := make([]any, 0, len(state.ActivityStates)+1)
	terminal = append(terminal, workflowExecID)
	for _, s := range state.ActivityStates {
		if s.Terminal() {
			terminal = append(terminal, string(s))
		}
	}
	var one int
	err := st.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT 1 FROM %s WHERE workflow_exec_id = ? AND (state IS NULL OR state NOT IN (%s)) LIMIT 1`,
		st.name("activity_exec"), strings.TrimSuffix(strings.Repeat("?, ", len(terminal)-1), ", ")), terminal...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("look for live activities of %s: %w", workflowExecID, st.translate(err))
	}
	return true, nil
}

// ActivitiesInState implements state.Store.
func (st *Store) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	if !q.State.Valid() || q.State.Terminal() {
		// As the DynamoDB store, whose state index holds live states only.
		return nil, fmt.Errorf("list %s activities: the state index holds live states only", q.State)
	}
	before := 1e18
	if !q.Before.IsZero() {
		before = float64(q.Before.UnixMilli()) / 1000
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	// The READY listing leaves out the waiters parked in their pools'
	// queues (poolwait.go) and the retries parked while they wait out
	// their delay (retrywait.go), as the DynamoDB store's READY shards
	// do. An item that moved on from READY while parked keeps pool_wait
	// or retry_wait, which mean nothing in its other states.
	parked := ""
	if q.State == state.Ready {
		parked = ` AND ` + retryWaitExpr + ` IS NULL AND ` + poolWaitExpr + ` IS NULL`
	}
	return st.refsInState(ctx, q.State, parked, before, limit)
}

// UpdateActivity implements state.Store.
func (st *Store) UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChange(c)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	a, _, err := st.updateActivity(ctx, key, cond, upd)
	if err == nil {
		st.wakeAfter(key, c)
	}
	return a, err
}

// Heartbeat implements state.Store.
func (st *Store) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	cond, upd := attr.Heartbeat(owner, at)
	_, _, err := st.updateActivity(ctx, key, cond, upd)
	return err
}

// updateActivity makes one conditional write and returns the item as
// written, or the conflict.
func (st *Store) updateActivity(ctx context.Context, key state.ActivityKey, cond attr.Cond, upd attr.Update) (*state.ActivityExec, bool, error) {
	it, old, err := st.update(ctx, "activity_exec", activityKey(key), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if it == nil {
		return nil, false, attr.Conflict("activity", st.prefix+"activity_exec", key.ActivityExecID, cond, old)
	}
	a, err := st.lenient(it)
	return a, true, err
}

// lenient decodes an item a write has touched: an attribute the write did
// not need being malformed is logged, not made a failure.
func (st *Store) lenient(it attr.Item) (*state.ActivityExec, error) {
	a, err := attr.DecodeActivity(st.prefix+"activity_exec", it)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		return a, nil
	}
	return a, err
}

// Expire implements state.Store. SQLite has no TTL: Install deletes the
// items whose time has come.
func (st *Store) Expire(ctx context.Context, id string, at time.Time) error {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return fmt.Errorf("expire: %w", err)
	}
	upd := attr.Expire(at)
	return st.tx(ctx, func(tx *sql.Tx) error {
		wf, err := st.get(ctx, tx, "workflow_exec", id, name)
		if err != nil {
			return err
		}
		if wf == nil {
			return &state.NotFoundError{Kind: "workflow", ID: id}
		}
		type entry struct {
			base string
			it   attr.Item
		}
		items := []entry{{"workflow_exec", wf}}
		if req, ok := wf["workflow_request_id"].(attr.S); ok {
			r, err := st.get(ctx, tx, "workflow_request", string(req), name)
			if err != nil {
				return err
			}
			if r != nil {
				items = append(items, entry{"workflow_request", r})
			}
		}
		queries := map[string]string{
			"activity_exec":            fmt.Sprintf(`SELECT item FROM %s WHERE workflow_exec_id = ?`, st.name("activity_exec")),
			"activity_exec_dependency": fmt.Sprintf(`SELECT item FROM %s WHERE workflow_exec_id = ?`, st.name("activity_exec_dependency")),
			// The Simple Lambda API's events of each activity go with it.
			"activity_event": fmt.Sprintf(`SELECT item FROM %s WHERE activity_exec_id IN (SELECT activity_exec_id FROM %s WHERE workflow_exec_id = ?)`,
				st.name("activity_event"), st.name("activity_exec")),
		}
		for _, base := range []string{"activity_exec", "activity_exec_dependency", "activity_event"} {
			rows, err := tx.QueryContext(ctx, queries[base], id)
			if err != nil {
				return st.translate(err)
			}
			for rows.Next() {
				var raw string
				if err := rows.Scan(&raw); err != nil {
					rows.Close()
					return err
				}
				it, err := decodeJSON(st.prefix+base, nil, raw)
				if err != nil {
					rows.Close()
					return err
				}
				items = append(items, entry{base, it})
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, x := range items {
			upd.Apply(x.it)
			if err := st.put(ctx, tx, x.base, x.it); err != nil {
				return err
			}
		}
		return nil
	})
}

// purge deletes the items whose expires_at has passed, as DynamoDB's TTL
// would.
func (st *Store) purge(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	for _, t := range tables {
		// A row another client wrote that is not JSON is left alone (and
		// reported by the reads that meet it), never an error of the purge.
		res, err := st.db.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE CASE WHEN json_valid(item) THEN CAST(json_extract(item, '$.%s.N') AS REAL) < ? ELSE 0 END`,
			st.name(t.base), attr.ExpiresAt), float64(now.Unix()))
		if err != nil {
			return n, fmt.Errorf("purge expired items of %s: %w", t.base, err)
		}
		k, _ := res.RowsAffected()
		n += k
	}
	return n, nil
}
