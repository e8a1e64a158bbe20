package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// watch judges an execution's watch: an execution that ended has its
// ending notified (by whoever recorded it, or now) and the watch done; a
// running one past its deadline fires deadline_missed, once: the
// deliveries have stable keys and are written only where absent, and the
// watch records that they were, conditionally on the version read.
func (d *Deliverer) watch(ctx context.Context, n *state.Notification, now time.Time) error {
	wf, err := d.st.GetWorkflow(ctx, n.WorkflowExecID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		prev := n.Version
		n.State, n.Due = state.NotificationDone, time.Time{}
		return conflictOr(d.st.UpdateNotification(ctx, n, prev), "close the watch of a deleted execution "+n.WorkflowExecID)
	case err != nil:
		return fmt.Errorf("read the execution of watch %s: %w", n.WorkflowExecID, err)
	}
	def := workflow.StoredOf(wf)
	if wf.State.Terminal() {
		acts, err := d.st.Activities(ctx, wf.WorkflowExecID)
		if _, err = state.Skipped(err); err != nil {
			return fmt.Errorf("read the activities of %s: %w", wf.WorkflowExecID, err)
		}
		if err := workflow.WriteEnding(ctx, d.st, def, wf, acts, now); err != nil {
			return fmt.Errorf("notify the ending of %s: %w", wf.WorkflowExecID, err)
		}
		return nil
	}
	prev := n.Version
	if !n.Deadline.IsZero() && !n.DeadlineFired && !now.Before(n.Deadline) {
		items := workflow.Deliveries(def, wf, nil, "deadline_missed", now)
		if _, err := d.st.PutNotifications(ctx, items); err != nil {
			return fmt.Errorf("write the deadline notifications of %s: %w", wf.WorkflowExecID, err)
		}
		n.DeadlineFired = true
		d.cfg.Logger.Info("deadline missed", "workflow_exec_id", wf.WorkflowExecID, "deadline", n.Deadline, "notifications", len(items))
	}
	n.Due = workflow.NextWatch(wf.StartTime, now, n.Deadline, n.DeadlineFired)
	return conflictOr(d.st.UpdateNotification(ctx, n, prev), "move the watch of "+wf.WorkflowExecID)
}
