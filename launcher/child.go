package launcher

import (
	"context"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// tryChild claims a READY activity that runs a child workflow and starts
// the child (workflow.StartChild): no backend and no process are
// involved, so any launcher starts children, and a child holds none of
// its --max-running slots. The claim is the usual READY → QUEUED move,
// so of any number of launchers one starts the child; the child's ID is
// derived from the parent activity, so a repair of a start that died
// makes the same child.
func (l *Launcher) tryChild(ctx context.Context, k state.ActivityKey, a *state.ActivityExec) error {
	st, ok := l.st.(workflow.Starter)
	if !ok {
		return nil // a store that cannot start executions: another launcher's work
	}
	// From the claim on, the start must run to its end: a fresh context
	// with its own deadline, as a launch's record has.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	wf, err := l.st.GetWorkflow(cctx, k.WorkflowExecID)
	if err != nil || wf.State != state.WorkflowRunning {
		return err
	}
	claimed, err := l.claim(cctx, k)
	if claimed == nil || err != nil {
		return err
	}
	log := l.log.With("activity_exec_id", k.ActivityExecID)
	id, err := workflow.StartChild(cctx, st, wf, claimed, l.log.Named("child"))
	if err != nil {
		// The monitor finishes it: a QUEUED activity fails at its queued
		// timeout (and is retried), a RUNNING one has its child started.
		log.Warn("starting a child workflow failed; the monitor will finish it", "child", id, "error", err)
		return err
	}
	log.Info("started child workflow", "child", id)
	if l.cfg.Observer != nil {
		l.cfg.Observer.Launched(claimed, definition.LaunchWorkflow, waitedSince(a, time.Now()))
	}
	return nil
}

// inFamily keeps, for a launcher limited to one workflow, the activities
// of that workflow and of its child workflows; an unlimited launcher
// keeps all.
func (l *Launcher) inFamily(ctx context.Context, refs []state.ActivityRef) []state.ActivityRef {
	if l.cfg.Workflow == "" {
		return refs
	}
	out := refs[:0:0]
	for _, r := range refs {
		if l.family.Has(ctx, l.st, r.WorkflowExecID) {
			out = append(out, r)
		}
	}
	return out
}
