package wrapper

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
)

// workflowStater is a Reporter that reads a workflow's state without the
// rest of its item.
type workflowStater interface {
	WorkflowState(ctx context.Context, id string) (state.WorkflowState, error)
}

// WorkflowState reads the workflow's state alone when the store can, and
// its whole item otherwise.
func (d direct) WorkflowState(ctx context.Context, id string) (state.WorkflowState, error) {
	if ws, ok := d.Store.(workflowStater); ok {
		return ws.WorkflowState(ctx, id)
	}
	wf, err := d.Store.GetWorkflow(ctx, id)
	if err != nil {
		return "", err
	}
	return wf.State, nil
}

// claimWorkflow is the workflow the claim checks is RUNNING before its
// write: at the first attempt, the item an inline supervisor read before
// the launch (Config.Workflow), if it handed one, with the state read
// from the store just now; otherwise, and at every later attempt, the
// item read from the store.
//
// The handed item's definition and parameters never change, but its
// state may: a cancel writes the workflow CANCELLED before it moves the
// activities, so an activity still waiting for its wrapper may belong to
// a workflow that is no longer RUNNING, and the wrapper must not start
// its command (docs/contract.md#workflow-states). The state is therefore
// read again, alone where the store can (a projected read), right before
// the claim's write.
func (r *run) claimWorkflow(ctx context.Context) (*state.WorkflowExec, error) {
	if wf := r.cfg.Workflow; wf != nil && r.wf == nil && wf.WorkflowExecID == r.cfg.Key.WorkflowExecID {
		ws, ok := r.st.(workflowStater)
		if !ok {
			r.cfg.Workflow = nil
			return r.st.GetWorkflow(ctx, wf.WorkflowExecID)
		}
		s, err := ws.WorkflowState(ctx, wf.WorkflowExecID)
		if err != nil {
			return nil, err // the next attempt tries again
		}
		r.cfg.Workflow = nil // a later attempt reads the whole item
		cp := *wf
		cp.State = s
		return &cp, nil
	}
	return r.st.GetWorkflow(ctx, r.cfg.Key.WorkflowExecID)
}
