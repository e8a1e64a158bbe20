package dynamodb

import (
	"context"
	"fmt"
	"strconv"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Waiting retries: state.RetryQueue on DynamoDB. A parked retry keeps its
// state and its state_time_epoch, and its state_shard is a waiting shard
// ("WAIT#7", by the hash of its ID as the READY shards are) instead of a
// READY one: the READY shards the launchers read then hold only what they
// may launch, and the same state index lists the waiting retries under
// StateShards keys of their own, whose writes spread as the READY shards'
// do. No index is added.

var _ state.RetryQueue = (*Store)(nil)

// waitValue starts the state_shard of a parked retry.
const waitValue = "WAIT"

// WaitShard is the state_shard of a READY retry parked while it waits out
// its delay.
func WaitShard(activityExecID string) string { return shardKey(waitValue, activityExecID) }

// UnparkRetry implements state.RetryQueue.
func (st *Store) UnparkRetry(ctx context.Context, k state.ActivityKey) error {
	return st.park(ctx, "UnparkRetry", k, attr.Update{Set: attr.Item{AttrStateShard: attr.S(StateShard(k.ActivityExecID, state.Ready))},
		Remove: []string{state.AttrRetryWait}})
}

// WaitingRetries implements state.RetryQueue: one query of each waiting
// shard of the state index, keys only.
func (st *Store) WaitingRetries(ctx context.Context) ([]state.ActivityRef, error) {
	q := state.ActivityQuery{State: state.Ready}
	out, _, err := queryShards(func(n int) ([]state.ActivityRef, error) {
		return st.shardRefs(ctx, q, waitValue+"#"+strconv.Itoa(n))
	}, func(a, b state.ActivityRef) bool {
		if !a.StateTime.Equal(b.StateTime) {
			return a.StateTime.Before(b.StateTime)
		}
		return a.ActivityExecID < b.ActivityExecID
	}, 0)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list the waiting retries: %w", other)
	}
	return out, err
}
