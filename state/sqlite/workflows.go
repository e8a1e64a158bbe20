package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// CreateWorkflow implements state.Store, in one transaction.
func (st *Store) CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error {
	if err := attr.CheckNewWorkflow(w); err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	err := st.tx(ctx, func(tx *sql.Tx) error {
		if r := w.Request; r != nil {
			cur, err := st.get(ctx, tx, "workflow_request", r.WorkflowRequestID, r.WorkflowName)
			if err != nil {
				return err
			}
			if cur != nil && cur["workflow_exec_id"] != attr.S(w.Exec.WorkflowExecID) {
				e := &state.ExistsError{What: "workflow request " + r.WorkflowRequestID}
				if v, ok := cur["workflow_exec_id"].(attr.S); ok {
					e.WorkflowExecID = string(v)
				}
				return e
			}
		}
		cur, err := st.get(ctx, tx, "workflow_exec", w.Exec.WorkflowExecID, w.Exec.WorkflowName)
		if err != nil {
			return err
		}
		if cur != nil && cur["state"] != attr.S(state.WorkflowRequested) {
			what := "workflow execution " + w.Exec.WorkflowExecID
			if s, ok := cur["state"].(attr.S); ok {
				what += " (" + string(s) + ")"
			}
			return &state.ExistsError{What: what, WorkflowExecID: w.Exec.WorkflowExecID}
		}
		if w.Request != nil {
			if err := st.put(ctx, tx, "workflow_request", attr.EncodeRequest(w.Request)); err != nil {
				return err
			}
		}
		if err := st.put(ctx, tx, "workflow_exec", attr.EncodeWorkflow(&w.Exec)); err != nil {
			return err
		}
		// Items an earlier attempt wrote are left as they are.
		for i := range w.Activities {
			a := &w.Activities[i]
			if err := st.putAbsent(ctx, tx, "activity_exec", attr.EncodeActivity(a), a.ActivityExecID, a.WorkflowExecID); err != nil {
				return err
			}
		}
		for i := range w.Dependencies {
			d := &w.Dependencies[i]
			if err := st.putAbsent(ctx, tx, "activity_exec_dependency", attr.EncodeDependency(d), d.ID, d.ActivityExecID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	return nil
}

func (st *Store) putAbsent(ctx context.Context, tx *sql.Tx, base string, it attr.Item, key ...string) error {
	cur, err := st.get(ctx, tx, base, key...)
	if err != nil || cur != nil {
		return err
	}
	return st.put(ctx, tx, base, it)
}

// GetWorkflow implements state.Store.
func (st *Store) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("get workflow: %w", err)
	}
	it, err := st.get(ctx, st.db, "workflow_exec", id, name)
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "workflow", ID: id}
	}
	w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", it)
	return w, st.undecoded.Check(err)
}

// GetRequest implements state.Store.
func (st *Store) GetRequest(ctx context.Context, id, workflowName string) (*state.WorkflowRequest, error) {
	it, err := st.get(ctx, st.db, "workflow_request", id, workflowName)
	if err != nil {
		return nil, fmt.Errorf("get workflow request %s: %w", id, err)
	}
	if it == nil {
		return nil, &state.NotFoundError{Kind: "workflow request", ID: id}
	}
	r, err := attr.DecodeRequest(st.prefix+"workflow_request", it)
	return r, st.undecoded.Check(err)
}

// UpdateWorkflow implements state.Store.
func (st *Store) UpdateWorkflow(ctx context.Context, id string, c state.WorkflowChange) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("update workflow: %w", err)
	}
	cond, upd, err := attr.WorkflowChange(c)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	it, old, err := st.update(ctx, "workflow_exec", []string{id, name}, cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	if it == nil {
		return nil, attr.Conflict("workflow", st.prefix+"workflow_exec", id, cond, old)
	}
	w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", it)
	if err != nil && w.State.Valid() {
		st.log.Warn("a workflow the store wrote has a malformed attribute", "error", err)
		return w, nil
	}
	return w, err
}

// Workflows implements state.Store.
func (st *Store) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	since := -1e18
	if !q.Since.IsZero() {
		since = float64(q.Since.UnixMilli()) / 1000
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	where, args := []string{"start_time_epoch >= ?"}, []any{since}
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if q.Name != "" {
		where, args = append(where, "workflow_name = ?"), append(args, q.Name)
	}
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "workflow_exec", skips, fmt.Sprintf(`WHERE %s ORDER BY start_time_epoch DESC LIMIT ?`,
		strings.Join(where, " AND ")), append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out := make([]*state.WorkflowExec, 0, len(its))
	for _, r := range its {
		w, err := attr.DecodeWorkflow(st.prefix+"workflow_exec", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		w.Definition = "" // as the DynamoDB index would: listings carry none
		out = append(out, w)
	}
	return out, skips.Err()
}
