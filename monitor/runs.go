package monitor

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// startWaitingRuns starts the oldest waiting runs of every workflow with
// max_active_runs that has REQUESTED executions, in case the participant
// that ended a run died before starting the next (workflow/runs.go). It
// returns the other REQUESTED executions: a run that waits for a slot is
// not a start that never finished.
func (s *sweep) startWaitingRuns(ctx context.Context, wfs []*state.WorkflowExec) []*state.WorkflowExec {
	starter, ok := s.st.(workflow.Starter)
	if !ok {
		return wfs // every store is one; a narrower test store fails stale starts as before
	}
	var rest []*state.WorkflowExec
	names := map[string]bool{}
	for _, wf := range wfs {
		if d := s.definition(ctx, wf.WorkflowExecID); d.MaxActiveRuns() == 0 {
			rest = append(rest, wf)
			continue
		}
		if names[wf.WorkflowName] {
			continue
		}
		names[wf.WorkflowName] = true
		if _, err := workflow.StartWaiting(ctx, starter, wf.WorkflowName, s.log.Named("runs")); err != nil {
			s.log.Warn("could not start waiting runs", "workflow", wf.WorkflowName, "error", err)
		}
	}
	return rest
}
