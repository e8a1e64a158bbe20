package sqlite

import (
	"context"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Parked waiters: state.PoolQueue on SQLite. A parked activity carries
// pool_wait in its item; the READY listing leaves it out, and its pool's
// queue lists it, both through an index on the state, the pool_wait of the
// item and the state time (parkIndex), which Install creates.

var _ state.PoolQueue = (*Store)(nil)

// poolWaitExpr is what the queries and parkIndex read of an item's
// pool_wait. A row another client wrote that is not JSON has none: the
// index must take every row, and the reads that meet it report it.
const poolWaitExpr = `(CASE WHEN json_valid(item) THEN json_extract(item, '$.` + state.AttrPoolWait + `.S') END)`

// parkIndex is the statement that creates the index of the READY listing
// and the pools' queues, on a table name.
func parkIndex(prefix, table string) string {
	return fmt.Sprintf(`CREATE INDEX IF NOT EXISTS "%s%s_by_state_pool_wait" ON %s (state, %s, state_time_epoch)`,
		prefix, state.TableActivityExec, table, poolWaitExpr)
}

// Park implements state.PoolQueue.
func (st *Store) Park(ctx context.Context, k state.ActivityKey, pool string) error {
	return st.park(ctx, "park", k, attr.Update{Set: attr.Item{state.AttrPoolWait: attr.S(pool)}})
}

// Unpark implements state.PoolQueue.
func (st *Store) Unpark(ctx context.Context, k state.ActivityKey) error {
	return st.park(ctx, "unpark", k, attr.Update{Remove: []string{state.AttrPoolWait}})
}

func (st *Store) park(ctx context.Context, op string, k state.ActivityKey, upd attr.Update) error {
	cond := attr.Cond{States: []string{string(state.Ready)}}
	m, old, err := st.update(ctx, state.TableActivityExec, activityKey(k), cond, upd)
	if err != nil {
		return fmt.Errorf("%s activity %s: %w", op, k.ActivityExecID, err)
	}
	if m == nil {
		return attr.Conflict("activity", st.prefix+state.TableActivityExec, k.ActivityExecID, cond, old)
	}
	return nil
}

// Parked implements state.PoolQueue.
func (st *Store) Parked(ctx context.Context, pool string, limit int) ([]state.ActivityRef, error) {
	if limit <= 0 {
		limit = -1
	}
	skips := st.undecoded.NewSkips()
	its, err := st.items(ctx, state.TableActivityExec, skips,
		`WHERE state = ? AND `+poolWaitExpr+` = ? ORDER BY state_time_epoch, activity_exec_id LIMIT ?`, string(state.Ready), pool, limit)
	if err != nil {
		return nil, fmt.Errorf("list the parked waiters of pool %s: %w", pool, err)
	}
	out := make([]state.ActivityRef, 0, len(its))
	for _, r := range its {
		ref, err := attr.DecodeRef(st.prefix+state.TableActivityExec, r.it)
		if err != nil {
			_ = skips.Add(r.decoded(err))
			continue
		}
		out = append(out, ref)
	}
	return out, skips.Err()
}
