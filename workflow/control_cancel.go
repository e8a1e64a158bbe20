package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// cancelToFinally cancels a RUNNING workflow that has finally activities:
// CANCELLED is recorded as its outcome (one conditional write), its
// activities are cancelled, and its finally activities are created; the
// workflow settles CANCELLED once they are final. ok is false for a
// workflow without finally activities, or not RUNNING: Cancel does the
// rest. A repeat finishes what an earlier call left.
func cancelToFinally(ctx context.Context, st Canceller, id, reason string, log hclog.Logger) (res Cancelled, ok bool, err error) {
	wf, err := st.GetWorkflow(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return res, false, nil // Cancel says so
	case err != nil:
		// A store that does not answer this read will not answer the
		// cancel's writes either: say so now rather than wait for them.
		return res, false, fmt.Errorf("cancel %s: %w", id, err)
	case wf.State != state.WorkflowRunning:
		return res, false, nil
	}
	d, err := definition.ReadStored(wf.Definition)
	if err != nil || len(d.FinallyNames()) == 0 {
		return res, false, nil
	}
	why := "cancelled"
	if reason != "" {
		why += ": " + reason
	}
	_, err = st.UpdateWorkflow(ctx, id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, Outcome: state.WorkflowCancelled,
		Reason: why + "; running its finally activities",
	})
	switch {
	case err == nil:
		res.Workflow = true
	case errors.Is(err, state.ErrConflict):
		if wf, err = st.GetWorkflow(ctx, id); err != nil {
			return res, true, fmt.Errorf("cancel %s: %w", id, err)
		}
		if wf.State != state.WorkflowRunning {
			return res, false, nil // settled meanwhile: Cancel says so
		}
		if wf.Outcome != state.WorkflowCancelled {
			// Its activities decided first; the finally activities run
			// for that outcome, which a cancel does not change.
			return res, true, &state.ConflictError{Kind: "workflow", ID: id, Want: "no outcome decided", State: string(wf.State) + " (outcome " + string(wf.Outcome) + ", running its finally activities)"}
		}
	default:
		return res, true, fmt.Errorf("cancel %s: %w", id, err)
	}
	acts, err := st.Activities(ctx, id)
	res.Undecodable, err = state.Skipped(err)
	if err != nil {
		return res, true, fmt.Errorf("cancel %s: %w", id, err)
	}
	for _, a := range acts {
		if d.IsFinally(a.ActivityName) {
			continue
		}
		s := a.State
		for tries := 0; tries < 3 && !s.Terminal(); tries++ {
			to := state.Cancelled
			if s == state.Running {
				to = state.CancelledRunning
			}
			_, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{From: []state.ActivityState{s}, To: to, Reason: "workflow " + why})
			if err == nil {
				if to == state.CancelledRunning {
					res.Running = append(res.Running, a.ActivityExecID)
				} else {
					res.Pending = append(res.Pending, a.ActivityExecID)
				}
				break
			}
			var ce *state.ConflictError
			if !errors.As(err, &ce) {
				return res, true, fmt.Errorf("cancel %s: %w", id, err)
			}
			s = state.ActivityState(ce.State)
		}
	}
	if ss, ok := st.(Settler); ok {
		if _, err := Settle(ctx, ss, id, log); err != nil {
			return res, true, fmt.Errorf("cancel %s: start its finally activities: %w", id, err)
		}
	}
	return res, true, nil
}
