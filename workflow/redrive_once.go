package workflow

import (
	"context"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
)

// A redrive of an execution has a request ID derived from the
// execution's, so that repeating `whimbrel rerun --from-failure` (a
// second click, a retried script) finds the redrive it started instead
// of running the failed activities twice. --again (StartOptions.Again)
// draws a fresh one.

// redriveRequestID is the request ID of the redrive of an execution.
func redriveRequestID(workflowExecID string) string {
	return workflowExecID + "@redrive"
}

// RedrivenError says that an execution was redriven before, and by which
// execution; a new redrive needs --again.
type RedrivenError struct {
	WorkflowExecID string // the execution redriven
	Redrive        string // the redrive that exists
	State          state.WorkflowState
}

func (e *RedrivenError) Error() string {
	switch e.State {
	case state.WorkflowCompleted:
		return fmt.Sprintf("rerun %s --from-failure: its redrive %s COMPLETED; nothing is left to run (--again forces a new redrive)", e.WorkflowExecID, e.Redrive)
	case state.WorkflowRequested, state.WorkflowRunning:
		return fmt.Sprintf("rerun %s --from-failure: its redrive %s is %s; wait for it (whimbrel status %s), or pass --again to start another", e.WorkflowExecID, e.Redrive, e.State, e.Redrive)
	}
	return fmt.Sprintf("rerun %s --from-failure: its redrive %s ended %s; redrive that one (whimbrel rerun --from-failure %s), or pass --again", e.WorkflowExecID, e.Redrive, e.State, e.Redrive)
}

// redriveOnce refuses a redrive of an execution that was redriven
// before, naming that redrive.
func redriveOnce(ctx context.Context, st Reader, id, redrive string) error {
	wf, err := st.GetWorkflow(ctx, redrive)
	if err != nil {
		return fmt.Errorf("rerun %s --from-failure: read its redrive %s: %w", id, redrive, err)
	}
	return &RedrivenError{WorkflowExecID: id, Redrive: redrive, State: wf.State}
}
