package workflow

import (
	"context"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// The interfaces below are the parts of a state.Store each move uses, so
// that a caller (the wrapper, the launcher, the monitor, a view) can hand
// over a store narrower than the whole; every state.Store satisfies them.
// They are composed from one another, smallest first.

// Reader reads an execution and its activities: what a view of one
// workflow needs.
type Reader interface {
	Getter
	Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error)
}

// Mover makes the contract's conditional moves of a workflow and of its
// activities.
type Mover interface {
	UpdateWorkflow(ctx context.Context, workflowExecID string, c state.WorkflowChange) (*state.WorkflowExec, error)
	UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error)
}

// Canceller is what Cancel needs: it moves an execution and its
// activities, and marks the execution's items to expire.
type Canceller interface {
	Reader
	Mover
	Expire(ctx context.Context, workflowExecID string, at time.Time) error
}

// Settler is what Settle needs: what Cancel does, and CreateActivity for
// a retry that is still to be made.
type Settler interface {
	Canceller
	CreateActivity(ctx context.Context, a *state.ActivityExec) error
}

// Advancer is what Advance needs: what Settle does, and the dependency
// items through which a completed activity readies its dependents.
type Advancer interface {
	Settler
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error)
	Dependencies(ctx context.Context, workflowExecID string) ([]state.Dependency, error)
	ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (a *state.ActivityExec, resolved bool, err error)
}

// Starter is what Start and Rerun need: Start creates an execution and
// moves it to RUNNING, and a redrive walks the activities it carries over
// to COMPLETED and advances past each, as Advance does.
type Starter interface {
	Advancer
	CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error
}

// Every store is a Starter, and so each of the smaller ones.
var _ Starter = state.Store(nil)

// launcherWaker is a store that can tell the launchers of its machine at
// once that activities were readied (the embedded store: every process
// that uses it is on one machine). Others leave it to the launchers'
// listing of the READY activities.
type launcherWaker interface{ WakeLaunchers() }

// wakeLaunchers tells st's launchers, if it can, that activities were
// readied: once per start, so that a launcher's first pass finds the
// whole start.
func wakeLaunchers(st any) {
	if w, ok := st.(launcherWaker); ok {
		w.WakeLaunchers()
	}
}
