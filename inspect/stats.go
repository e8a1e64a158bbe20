package inspect

import (
	"context"

	"github.com/whimbrel/whimbrel/state"
)

// LoadStats reads the executions q selects and counts them (see Compute).
// An execution that cannot be decoded is reported by the store and left
// out.
func LoadStats(ctx context.Context, st Lister, q state.WorkflowQuery) ([]Stats, error) {
	wfs, err := st.Workflows(ctx, q)
	if _, err := state.Skipped(err); err != nil {
		return nil, err
	}
	return Compute(wfs), nil
}
