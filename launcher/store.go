package launcher

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a launcher needs of a store: the READY activities to
// claim, and what advancing past a launch that failed needs.
type Store interface {
	workflow.Advancer
	ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error)
}
