package sqlite

import (
	"context"
	"fmt"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// ResolveDependency implements state.Store.
func (st *Store) ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (*state.ActivityExec, bool, error) {
	cond, upd := attr.ResolveDependency(upstreamID)
	it, old, err := st.update(ctx, "activity_exec", activityKey(waiting), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("resolve dependency of %s on %s: %w", waiting.ActivityExecID, upstreamID, err)
	}
	resolved := it != nil
	if !resolved {
		if old == nil {
			return nil, false, &state.NotFoundError{Kind: "activity", ID: waiting.ActivityExecID}
		}
		it = old
	}
	a, err := st.lenient(it)
	return a, resolved, err
}

// Dependencies implements state.Store.
func (st *Store) Dependencies(ctx context.Context, workflowExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "workflow_exec_id", workflowExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependencies of %s: %w", workflowExecID, err)
	}
	return out, err
}

// Dependents implements state.Store.
func (st *Store) Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "dependent_activity_exec_id", activityExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependents of %s: %w", activityExecID, err)
	}
	return out, err
}

// dependencyItems reads the dependency items whose column equals value,
// ordered by ID.
func (st *Store) dependencyItems(ctx context.Context, column, value string) ([]state.Dependency, error) {
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, "activity_exec_dependency", skips, fmt.Sprintf(`WHERE "%s" = ? ORDER BY activity_exec_dependency`, column), value)
	if err != nil {
		return nil, err
	}
	out := make([]state.Dependency, 0, len(its))
	for _, r := range its {
		d, err := attr.DecodeDependency(st.prefix+"activity_exec_dependency", r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, d)
	}
	return out, skips.Err()
}
