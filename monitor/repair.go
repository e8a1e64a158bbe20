package monitor

import (
	"context"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// repair finishes, for every RUNNING workflow, the advances that crashed
// participants left half-done, and settles the workflow when every
// activity is terminal.
func (s *sweep) repair(ctx context.Context) error {
	wfs, err := s.st.Workflows(ctx, state.WorkflowQuery{State: state.WorkflowRunning})
	if err = s.skipped(err); err != nil {
		return fmt.Errorf("list running workflows: %w", err)
	}
	s.seen.listedWorkflows(state.WorkflowRunning, wfs, s.cfg.Workflow)
	for _, wf := range wfs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !s.scope.Has(ctx, s.st, wf.WorkflowExecID) {
			continue
		}
		err := s.orphan(ctx, wf.WorkflowExecID)
		if err == nil {
			err = s.repairWorkflow(ctx, wf.WorkflowExecID)
		}
		switch {
		case errors.Is(err, state.ErrUnavailable):
			return err
		case ctx.Err() != nil:
			// The monitor is stopping: the repair was cut short, not
			// refused, and the next sweep takes it up again.
			return ctx.Err()
		case errors.Is(err, state.ErrInvalidItem):
			s.report.Undecodable++
		case err != nil:
			s.log.Warn("could not repair a workflow", "workflow_exec_id", wf.WorkflowExecID, "error", err)
		}
	}
	return nil
}

func (s *sweep) repairWorkflow(ctx context.Context, id string) error {
	acts, err := s.st.Activities(ctx, id)
	skipped, err := state.Skipped(err)
	if err != nil {
		return err
	}
	s.report.Undecodable += len(skipped)
	byID := map[string]*state.ActivityExec{}
	for _, a := range acts {
		byID[a.ActivityExecID] = a
	}
	// Dependents wait on an activity by its first attempt's ID; what
	// counts is its latest attempt (the earlier ones were retried).
	// Another client's workflow has no retries: each item counts.
	def := s.definition(ctx, id)
	final := workflow.Finals(def != nil, acts)
	// An activity that ended still blocks a dependent that has not started:
	// its advance did not finish.
	unfinished := map[string]bool{}
	for _, d := range acts {
		if d.State.Terminal() {
			continue
		}
		for _, up := range d.PendingDependencies {
			if u := byID[up]; u != nil {
				if l := final[u.ActivityExecID]; l != nil && l.State.Terminal() {
					unfinished[l.ActivityExecID] = true
				}
			}
		}
	}
	// A REQUESTED activity whose upstreams all completed was never readied:
	// its start, or the advance that resolved its last edge, died before.
	// Only for workflows with a stored definition: another client's may
	// keep no pending sets, and its own rules.
	if def != nil {
		if err := s.repairMaps(ctx, def, acts); err != nil {
			return err
		}
		latest := workflow.Latest(acts)
		byName := latest
		// A failed attempt whose retry was never made: whoever recorded
		// the failure died before deciding it. The advance decides it.
		for _, l := range latest {
			if workflow.RetryPending(def, l) {
				unfinished[l.ActivityExecID] = true
			}
		}
		for _, a := range acts {
			if a.State != state.Requested || len(a.PendingDependencies) > 0 || def.Activities[a.ActivityName] == nil || isMap(def, a) || a.ItemIndex != nil {
				continue
			}
			if def.Controlled() {
				// Its rule and its when decide it, as its last
				// upstream's advance would have.
				if _, err := workflow.Decide(ctx, s.st, a, s.log.Named("advance")); err != nil {
					return err
				}
				continue
			}
			done := true
			for _, up := range def.Activities[a.ActivityName].DependsOn {
				if u := byName[up]; u == nil || u.State != state.Completed {
					done = false
				}
			}
			if !done {
				continue
			}
			_, err := s.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
				From: []state.ActivityState{state.Requested}, To: state.Ready, At: s.now,
				Reason: "every activity it waits on completed",
			})
			switch {
			case errors.Is(err, state.ErrConflict):
			case err != nil:
				return err
			default:
				s.report.Repaired++
				s.report.Readied++
				s.log.Info("readied an activity a crash left waiting", "activity_exec_id", a.ActivityExecID)
			}
		}
	}
	// A retry whose taker died after creating it, before linking the
	// failed attempt to it (retried_by): link it now.
	for _, a := range acts {
		prev := byID[a.RetryOf]
		if a.RetryOf == "" || prev == nil || prev.RetriedBy != "" || !prev.State.EndedBadly() {
			continue
		}
		_, err := s.st.UpdateActivity(ctx, prev.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{prev.State}, RetriedBy: a.ActivityExecID,
		})
		switch {
		case errors.Is(err, state.ErrConflict):
		case err != nil:
			return err
		default:
			s.report.Repaired++
			s.log.Info("linked a failed attempt to its retry", "activity_exec_id", prev.ActivityExecID, "retried_by", a.ActivityExecID)
		}
	}
	for upID := range unfinished {
		u := byID[upID]
		if u == nil || !u.State.Terminal() {
			continue
		}
		if !u.EndTime.IsZero() && s.now.Sub(u.EndTime) < s.cfg.AdvanceGrace {
			continue // its own advance is likely still under way
		}
		s.report.Repaired++
		s.log.Info("finishing the advance after an activity that ended", "activity_exec_id", upID, "state", u.State)
		if err := s.advance(ctx, u); err != nil {
			return err
		}
	}
	if len(unfinished) > 0 || len(skipped) > 0 {
		// The advances settle the workflow if it is done; and one whose
		// activities could not all be read cannot be judged done.
		return nil
	}
	for _, a := range acts {
		if !a.State.Terminal() {
			return nil // not done: no need to read it all again
		}
	}
	settled, err := workflow.Settle(ctx, s.st, id, s.log.Named("advance"))
	if settled != "" {
		s.report.Settled++
	}
	return err
}
