package inspect

import (
	"fmt"
	"io"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// WorkflowControl is what a view shows of a workflow's control flow
// (docs/control-flow.md).
type WorkflowControl struct {
	// Outcome is the state the activities decided while the finally
	// activities run; DecidedBy the activity that decided it.
	Outcome   state.WorkflowState `json:"outcome,omitempty"`
	DecidedBy string              `json:"decided_by,omitempty"`
	// FinallyFailed names the finally activities that did not complete.
	FinallyFailed string `json:"finally_failed,omitempty"`
}

// ActivityControl is what a view shows of an activity's control flow.
type ActivityControl struct {
	// Shown is how a view shows the state when it says more than the
	// state: SKIPPED, or CANCELLED (rule) for one whose trigger rule
	// could not be met.
	Shown   string `json:"shown,omitempty"`
	Skipped bool   `json:"skipped,omitempty"`
	// RuleCancelled: cancelled because its trigger rule was not met.
	RuleCancelled bool `json:"rule_cancelled,omitempty"`
	// Finally marks a finally activity.
	Finally bool `json:"finally,omitempty"`
}

// The states shown beyond the contract's.
const (
	ShownSkipped       = "SKIPPED"
	ShownRuleCancelled = "CANCELLED (rule)"
)

func workflowControl(w *state.WorkflowExec) WorkflowControl {
	return WorkflowControl{Outcome: w.Outcome, DecidedBy: w.DecidedBy, FinallyFailed: w.FinallyFailed}
}

func activityControl(def *definition.Workflow, a *state.ActivityExec) ActivityControl {
	c := ActivityControl{Skipped: a.Skipped, RuleCancelled: workflow.RuleCancelled(a)}
	if def != nil && def.Activities[a.ActivityName] == nil && def.Finally[a.ActivityName] != nil {
		c.Finally = true
	}
	switch {
	case workflow.Shown(a) == ShownSkipped:
		c.Shown = ShownSkipped
	case c.RuleCancelled:
		c.Shown = ShownRuleCancelled
	}
	return c
}

// shownState is the state cell of an activity's row.
func (a Activity) shownState() string {
	st := string(a.State)
	if a.Shown != "" {
		st = a.Shown
	}
	if a.Finally {
		st += " (finally)"
	}
	return st
}

// writeControl writes who decided the workflow's outcome and which
// finally activities failed.
func (w Workflow) writeControl(out io.Writer) {
	if w.Outcome != "" && !w.State.Terminal() {
		fmt.Fprintf(out, "  outcome %s; its finally activities are running\n", w.Outcome)
	}
	if w.DecidedBy != "" {
		fmt.Fprintf(out, "  decided by: %s\n", inert.String(w.DecidedBy))
	}
	if w.FinallyFailed != "" {
		fmt.Fprintf(out, "  finally failed: %s\n", inert.String(w.FinallyFailed))
	}
}

// shownActivity is an activity's state cell, painted: SKIPPED unpainted,
// a rule's cancellation as a cancellation, a finally activity marked.
func (c Colors) shownActivity(a Activity) string {
	painted := c.Activity(a.State)
	switch a.Shown {
	case ShownSkipped:
		painted = ShownSkipped
	case ShownRuleCancelled:
		painted = c.paint(activityColors[state.Cancelled], ShownRuleCancelled)
	}
	if a.Finally {
		painted += " (finally)"
	}
	return painted
}
