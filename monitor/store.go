package monitor

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a monitor needs of a store: the activities in each state
// and the workflows running or still starting to judge, and what
// advancing and settling after its verdicts needs.
type Store interface {
	workflow.Advancer
	ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error)
	Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error)
}
