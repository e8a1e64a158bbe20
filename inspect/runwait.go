package inspect

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// workflowGetter reads one execution with its definition: what a listing
// needs to say why a REQUESTED run waits (the listing's index carries no
// definition).
type workflowGetter interface {
	GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error)
}

// runWaits fills in the reason of each listed REQUESTED execution that has
// none and waits for max_active_runs, as status says it: one read of the
// execution each, and one of its workflow's running slots a workflow
// name. Reading fails quietly: the row then shows no reason.
func runWaits(ctx context.Context, st Lister, rows []Workflow) {
	g, ok := st.(workflowGetter)
	if !ok {
		return
	}
	byName := map[string]string{}
	for i, r := range rows {
		if r.State != state.WorkflowRequested || r.Reason != "" {
			continue
		}
		why, seen := byName[r.Name]
		if !seen {
			wf, err := g.GetWorkflow(ctx, r.ID)
			if err != nil {
				continue
			}
			why = workflow.RunWaitReason(ctx, st, wf)
			byName[r.Name] = why
		}
		rows[i].Reason = why
	}
}
