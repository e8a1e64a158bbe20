package wrapper

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
)

// claimWorkflow is the workflow the claim checks is RUNNING before its
// write: at the first attempt, the item an inline supervisor read just
// before the launch (Config.Workflow), if it handed one; otherwise, and
// at every later attempt, the item read from the store.
//
// Taking the supervisor's read widens no window: the claim's write is
// conditional on the activity's own state, so an activity that a cancel
// has reached is not claimed, and one the cancel reaches after the claim
// is CANCELLED_RUNNING, which the wrapper's watch and heartbeat act on,
// as when the cancel lands between its own read and its write
// (docs/contract.md#transitions: RUNNING → CANCELLED_RUNNING).
func (r *run) claimWorkflow(ctx context.Context) (*state.WorkflowExec, error) {
	if wf := r.cfg.Workflow; wf != nil && r.wf == nil && wf.WorkflowExecID == r.cfg.Key.WorkflowExecID {
		r.cfg.Workflow = nil // a later attempt reads the store
		return wf, nil
	}
	return r.st.GetWorkflow(ctx, r.cfg.Key.WorkflowExecID)
}
