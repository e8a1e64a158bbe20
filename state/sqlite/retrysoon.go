package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// Retries due soon: state.DueRetryQueue on SQLite. The index of the READY
// listing (waitIndex) holds the parked retries apart, with their
// retry_wait (a number written as text, as the contract's items carry it,
// hence the cast), so one listing finds every parked retry that is due,
// whatever its delay:
// the latest window's listing is enough (RetryCycle is 1), and a launcher
// puts back a retry parked for an hour as promptly as one parked for
// seconds.

var _ state.DueRetryQueue = (*Store)(nil)

// DueRetries implements state.DueRetryQueue.
func (st *Store) DueRetries(ctx context.Context, end time.Time, limit int) ([]state.ActivityRef, error) {
	if limit <= 0 {
		limit = -1
	}
	due := float64(end.UnixMilli()) / 1000
	refs, err := st.refsInState(ctx, state.Ready, fmt.Sprintf(` AND %s IS NOT NULL AND CAST(%s AS REAL) < %.3f`, retryWaitExpr, retryWaitExpr, due), 1e18, limit)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list the retries due by %s: %w", end.UTC().Format(time.RFC3339), other)
	}
	return refs, err
}

// RetryCycle implements state.DueRetryQueue.
func (st *Store) RetryCycle() int { return 1 }
