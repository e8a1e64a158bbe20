package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// Cancelled says what one Cancel changed.
type Cancelled struct {
	Workflow bool     // this call moved the workflow to CANCELLED
	Pending  []string // activities moved to CANCELLED
	Running  []string // activities moved to CANCELLED_RUNNING; their wrappers stop them
	// Undecodable lists the activities that could not be decoded, by key,
	// and were left as they are; the store reported each.
	Undecodable []*state.DecodeError
}

// Cancel cancels a workflow: the workflow becomes CANCELLED, its pending
// activities CANCELLED and its running ones CANCELLED_RUNNING, which their
// wrappers notice at their next heartbeat. Repeating it finishes what an
// earlier call left. A workflow that settled otherwise is not changed: the
// error is a *state.ConflictError naming its state.
func Cancel(ctx context.Context, st Canceller, id, reason string, log hclog.Logger) (Cancelled, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	var res Cancelled
	if res, ok, err := cancelToFinally(ctx, st, id, reason, log); ok || err != nil {
		return res, err // control_cancel.go: its finally activities run
	}
	cancelled, err := st.UpdateWorkflow(ctx, id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested, state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: reason,
	})
	var ce *state.ConflictError
	switch {
	case err == nil:
		res.Workflow = true
		if g, err := graphOf(ctx, st, id); err == nil {
			expire(ctx, st, g, cancelled, log)
		}
		defer finishAfterSettle(ctx, st, cancelled, log)
	case errors.As(err, &ce) && ce.State == string(state.WorkflowCancelled):
		// Cancelled before: finish the activities below.
	default:
		return res, fmt.Errorf("cancel %s: %w", id, err)
	}
	acts, err := st.Activities(ctx, id)
	res.Undecodable, err = state.Skipped(err) // the others are cancelled all the same
	if err != nil {
		return res, fmt.Errorf("cancel %s: %w", id, err)
	}
	why := "workflow cancelled"
	if reason != "" {
		why += ": " + reason
	}
	for _, a := range acts {
		// An activity can move while we look (a wrapper claims it): try
		// again from the state the conflict reports, a few times.
		s := a.State
		for tries := 0; tries < 3 && !s.Terminal(); tries++ {
			to := state.Cancelled
			if s == state.Running {
				to = state.CancelledRunning
			}
			moved, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{From: []state.ActivityState{s}, To: to, Reason: why})
			if err == nil {
				if to == state.CancelledRunning {
					res.Running = append(res.Running, a.ActivityExecID)
					cancelChild(ctx, st, moved, why, log)
				} else {
					res.Pending = append(res.Pending, a.ActivityExecID)
				}
				log.Info("cancelled", "activity_exec_id", a.ActivityExecID, "state", to)
				break
			}
			if !errors.As(err, &ce) {
				return res, fmt.Errorf("cancel %s: %w", id, err)
			}
			s = state.ActivityState(ce.State)
		}
	}
	if res.Workflow {
		notifyEnding(ctx, st, nil, cancelled, acts, log)
	}
	return res, nil
}
