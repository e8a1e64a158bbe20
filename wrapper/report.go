package wrapper

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Reporter is what the wrapper needs to report an activity's life: read
// the workflow and the activities (the claim, the command's data), write
// the activity conditionally (the claim, the outcome), heartbeat, and
// Recorded, called once an outcome is recorded.
//
// Direct is the Full Logic API's reporter. The Simple Lambda API's
// (simpleapi/report) writes activity events instead, for a processor to
// apply; which one a wrapper uses is chosen where it is wired
// (cmd/whimbrel-run --api).
type Reporter interface {
	GetWorkflow(ctx context.Context, workflowExecID string) (*state.WorkflowExec, error)
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error)
	UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error)
	Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error
	// Recorded moves the workflow on after the outcome of a (as written)
	// was recorded, and reports whether that readied activities (so a
	// local launcher is worth waking). wf is the workflow as the wrapper
	// read it at its claim, or nil: its definition never changes, so it
	// need not be read again. An error leaves the rest to the monitor.
	Recorded(ctx context.Context, a *state.ActivityExec, wf *state.WorkflowExec, log hclog.Logger) (readied bool, err error)
}

// Direct reports straight to a store and advances the workflow itself.
func Direct(st state.Store) Reporter { return direct{st} }

type direct struct{ state.Store }

func (d direct) Recorded(ctx context.Context, a *state.ActivityExec, wf *state.WorkflowExec, log hclog.Logger) (bool, error) {
	res, err := workflow.AdvanceKnown(ctx, d.Store, wf, a, log)
	return len(res.Readied) > 0, err
}
