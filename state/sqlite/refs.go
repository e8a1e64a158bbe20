package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// refsInState lists the activities in a live state from the columns the
// state index is made of, as the DynamoDB store's keys-only state index
// does, without reading their items: a launcher's pass and a monitor's
// sweep list every READY or RUNNING activity, and decoding each one's
// item cost them more than the rest of the pass. A row whose columns do
// not hold what the item's attributes would (a key that is not a
// non-empty String, a state time out of the contract's range: only rows
// written by another client) is read from its item, and reported the way
// every read reports a malformed item. and narrows the rows further (an
// SQL condition starting with AND, or nothing).
func (st *Store) refsInState(ctx context.Context, s state.ActivityState, and string, before float64, limit int) ([]state.ActivityRef, error) {
	rows, err := st.db.QueryContext(ctx, fmt.Sprintf(`SELECT activity_exec_id, workflow_exec_id, state_time_epoch,
		CASE WHEN typeof(activity_exec_id) = 'text' AND activity_exec_id <> '' AND typeof(workflow_exec_id) = 'text' AND workflow_exec_id <> ''
			AND typeof(state_time_epoch) IN ('integer', 'real') AND state_time_epoch < %g THEN NULL ELSE item END
		FROM %s WHERE state = ?%s AND state_time_epoch < ? ORDER BY state_time_epoch LIMIT ?`, maxEpoch, st.name("activity_exec"), and),
		string(s), before, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s activities: %w", s, st.translate(err))
	}
	defer rows.Close()
	skips := st.undecoded.NewSkips()
	var out []state.ActivityRef
	for rows.Next() {
		var id, wf, raw sql.NullString
		var epoch sql.NullFloat64
		if err := rows.Scan(&id, &wf, &epoch, &raw); err != nil {
			return nil, fmt.Errorf("list %s activities: %w", s, err)
		}
		if !raw.Valid {
			ref := state.ActivityRef{ActivityKey: state.ActivityKey{ActivityExecID: id.String, WorkflowExecID: wf.String}}
			if epoch.Float64 >= 0 { // a negative epoch is the contract's "not set"
				ref.StateTime = time.UnixMilli(int64(math.Round(epoch.Float64 * 1000))).UTC()
			}
			out = append(out, ref)
			continue
		}
		key := []string{id.String, wf.String}
		it, err := decodeJSON(st.prefix+"activity_exec", key, raw.String)
		if err := skips.Add(err); err != nil {
			return nil, err
		}
		if it == nil {
			continue
		}
		ref, err := attr.DecodeRef(st.prefix+"activity_exec", it)
		if err != nil {
			_ = skips.Add(keyed(err, key))
			continue
		}
		out = append(out, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s activities: %w", s, err)
	}
	return out, skips.Err()
}

// maxEpoch is the largest state time, in epoch seconds, that
// state.ParseEpoch accepts: a column beyond it is read from its item,
// which reports it.
const maxEpoch = 1e11

// WorkflowState reads a workflow's state alone, from its state column: a
// launcher that has its definition already need not read and decode the
// item's definition at every pass. A row whose column does not hold one of
// the contract's states is read whole, so that the error names what is
// wrong with its item.
func (st *Store) WorkflowState(ctx context.Context, id string) (state.WorkflowState, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return "", fmt.Errorf("get workflow: %w", err)
	}
	var s sql.NullString
	err = st.db.QueryRowContext(ctx, `SELECT CASE WHEN typeof(state) = 'text' THEN state END FROM `+st.name("workflow_exec")+
		` WHERE workflow_exec_id = ? AND workflow_name = ?`, id, name).Scan(&s)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", &state.NotFoundError{Kind: "workflow", ID: id}
	case err != nil:
		return "", fmt.Errorf("get workflow %s: %w", id, st.translate(err))
	case s.Valid && state.WorkflowState(s.String).Valid():
		return state.WorkflowState(s.String), nil
	}
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return "", err
	}
	return wf.State, nil
}
