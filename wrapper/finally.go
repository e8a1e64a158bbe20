package wrapper

import (
	"context"
	"fmt"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// EnvWorkflowState names the variable that hands a finally activity the
// state its workflow's activities decided (docs/control-flow.md).
const EnvWorkflowState = "WHIMBREL_WORKFLOW_STATE"

// finallyData hands every activity the workflow's name and ID for its
// templates, and a finally activity the workflow's outcome and the
// activities that failed.
func finallyData(ctx context.Context, st workflow.Reader, wf *state.WorkflowExec, a *state.ActivityExec, in *Inputs, td *definition.Data) error {
	td.Workflow = map[string]string{"name": wf.WorkflowName, "id": wf.WorkflowExecID}
	d, err := definition.ReadStored(wf.Definition)
	if err != nil || !d.IsFinally(a.ActivityName) {
		return nil
	}
	if wf.Outcome == "" {
		// A supervisor in process hands the claim the item it read
		// before the outcome was decided (Config.Workflow), with only its
		// state read again; the outcome, decided before a finally
		// activity is readied, is in the item as it is now.
		now, err := st.GetWorkflow(ctx, wf.WorkflowExecID)
		if err != nil {
			return fmt.Errorf("read the workflow's outcome: %w", err)
		}
		wf = now
	}
	outcome, failed, err := workflow.FinallyInputs(ctx, st, wf)
	if err != nil {
		return fmt.Errorf("read the workflow's activities: %w", err)
	}
	in.WorkflowState, in.Failed = string(outcome), failed
	td.Workflow["state"] = string(outcome)
	return nil
}
