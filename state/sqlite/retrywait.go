package sqlite

import (
	"context"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Waiting retries: state.RetryQueue on SQLite. A parked retry carries
// retry_wait in its item; the READY listing leaves it out, and the
// waiting retries' listing lists it, both through an index on the state,
// the retry_wait and pool_wait of the item and the state time
// (waitIndex), which Install creates.

var _ state.RetryQueue = (*Store)(nil)

// retryWaitExpr is what the queries and waitIndex read of an item's
// retry_wait. A row another client wrote that is not JSON has none.
const retryWaitExpr = `(CASE WHEN json_valid(item) THEN json_extract(item, '$.` + state.AttrRetryWait + `.N') END)`

// waitIndex is the statement that creates the index of the READY listing
// and the waiting retries' listing, on a table name.
func waitIndex(prefix, table string) string {
	return fmt.Sprintf(`CREATE INDEX IF NOT EXISTS "%s%s_by_state_retry_wait" ON %s (state, %s, %s, state_time_epoch)`,
		prefix, state.TableActivityExec, table, retryWaitExpr, poolWaitExpr)
}

// UnparkRetry implements state.RetryQueue.
func (st *Store) UnparkRetry(ctx context.Context, k state.ActivityKey) error {
	return st.park(ctx, "unpark retry", k, attr.Update{Remove: []string{state.AttrRetryWait}})
}

// WaitingRetries implements state.RetryQueue.
func (st *Store) WaitingRetries(ctx context.Context) ([]state.ActivityRef, error) {
	refs, err := st.refsInState(ctx, state.Ready, ` AND `+retryWaitExpr+` IS NOT NULL`, 1e18, -1)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list the waiting retries: %w", other)
	}
	return refs, err
}
