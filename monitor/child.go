package monitor

import (
	"context"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// The monitor repairs what a participant that died left of a child
// workflow (docs/sub-workflows.md): a parent activity RUNNING for a child
// that was never started, or that settled without ending it; and a child
// still live whose parent activity ended (cancel goes down).

// child judges a RUNNING activity held by a child workflow instead of
// by its heartbeat, which it has none of: it starts the child if its
// start never happened, and ends the activity if the child settled.
func (s *sweep) child(ctx context.Context, wf *state.WorkflowExec, a *state.ActivityExec, childID string) error {
	cw, err := s.st.GetWorkflow(ctx, childID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		if wf.State != state.WorkflowRunning {
			return nil
		}
		// Its starter died between the claim and the start; the start is
		// keyed by the parent, so a starter still at work makes the same
		// child.
		starter, ok := s.st.(workflow.Starter)
		if !ok {
			return nil // a store that cannot start executions: another monitor's work
		}
		s.log.Info("starting a child workflow whose start did not finish", "activity_exec_id", a.ActivityExecID, "child", childID)
		_, err := workflow.StartChild(ctx, starter, wf, a, s.log.Named("child"))
		if err == nil {
			s.report.Repaired++
		}
		return err
	case err != nil:
		return fmt.Errorf("read child workflow %s: %w", childID, err)
	case cw.State == state.WorkflowRequested && wf.State == state.WorkflowRunning:
		// Its start died half-way: repeating it with the same request
		// finishes it.
		if starter, ok := s.st.(workflow.Starter); ok {
			_, err := workflow.StartChild(ctx, starter, wf, a, s.log.Named("child"))
			return err
		}
		return nil
	case !cw.State.Terminal():
		return nil
	}
	if err := workflow.FinishParent(ctx, s.st, cw, s.log.Named("child")); err != nil {
		return err
	}
	s.report.Repaired++
	return nil
}

// orphan cancels a live child workflow whose parent activity is no longer
// RUNNING for it: the parent was cancelled (or failed) and whoever did it
// died before the cancel went down.
func (s *sweep) orphan(ctx context.Context, id string) error {
	wf, err := s.workflow(ctx, id)
	if err != nil || wf.ParentActivityExecID == "" || wf.State.Terminal() {
		return err
	}
	p, err := s.st.GetActivity(ctx, wf.Parent.Key())
	if errors.Is(err, state.ErrNotFound) {
		return nil // another client's link: nothing to judge
	}
	if err != nil {
		return err
	}
	// Only a cancel ends a parent activity while its child lives: its
	// settling ends it otherwise, after the child settled.
	if owner, ok := state.ChildOf(p); !ok || owner != id || (p.State != state.CancelledRunning && p.State != state.TimedOut) {
		return nil
	}
	_, err = workflow.Cancel(ctx, s.st, id, fmt.Sprintf("parent activity %s is %s", p.ActivityExecID, p.State), s.log.Named("child"))
	var ce *state.ConflictError
	if errors.As(err, &ce) {
		return nil
	}
	if err == nil {
		s.report.CancelledRunning++
	}
	return err
}
