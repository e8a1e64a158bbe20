package dynamodb

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Retries due soon: state.DueRetryQueue on DynamoDB. A retry parked with a
// delay under state.RetryParkAfter carries a state_shard of its own,
// SOON#b#n: b is the window of its not_before (Unix seconds ÷
// state.RetryWindow, rounded down) modulo soonBuckets, n as for its READY
// shard. The windows come round every soonBuckets of them, so the keys
// are a fixed set (soonBuckets × StateShards), and the writes of the
// retries due in one window spread over StateShards keys as the READY
// shards' do. A launcher reads a window once it has ended: StateShards
// queries of the state index, keys only, whose range key condition
// (state_time_epoch before the window's end) leaves out every retry of a
// later round of the same bucket. Such a retry was created at most
// state.RetryParkAfter before it is due, and a round is longer than that
// by more than a window; so the listing holds exactly the retries of that
// bucket that are due, and nothing is read that is not.

var _ state.DueRetryQueue = (*Store)(nil)

// soonValue starts the state_shard of a retry parked with a short delay.
const soonValue = "SOON"

// soonBuckets is how many windows a round of the SOON shards has: their
// span must exceed state.RetryParkAfter by at least a window.
const soonBuckets = 64

// SoonShard is the state_shard of a READY retry parked with a delay under
// state.RetryParkAfter, due at notBefore.
func SoonShard(activityExecID string, notBefore time.Time) string {
	return shardKey(soonValue+"#"+strconv.Itoa(soonBucket(notBefore)), activityExecID)
}

// soonBucket is the bucket of the window t falls in.
func soonBucket(t time.Time) int {
	w := int64(math.Floor(float64(t.UnixMilli()) / float64(state.RetryWindow.Milliseconds())))
	return int(((w % soonBuckets) + soonBuckets) % soonBuckets)
}

// retryShard is the state_shard of a parked retry, from its retry_wait
// and its state_time_epoch: a SOON shard when its delay is shorter than
// state.RetryParkAfter, else a WAIT shard. An item whose times do not
// parse waits under a WAIT shard, which the monitor's sweep reads.
func retryShard(id string, retryWait attr.N, stateTime attr.Value) string {
	due, err := state.ParseEpoch(string(retryWait))
	st, ok := stateTime.(attr.N)
	if err != nil || !ok {
		return WaitShard(id)
	}
	at, err := state.ParseEpoch(string(st))
	if err != nil || at.IsZero() || due.Sub(at) >= state.RetryParkAfter {
		return WaitShard(id)
	}
	return SoonShard(id, due)
}

// DueRetries implements state.DueRetryQueue: one query of each SOON shard
// of end's window, keys only.
func (st *Store) DueRetries(ctx context.Context, end time.Time, limit int) ([]state.ActivityRef, error) {
	b := soonValue + "#" + strconv.Itoa(soonBucket(end.Add(-state.RetryWindow))) + "#"
	q := state.ActivityQuery{State: state.Ready, Before: end, Limit: limit}
	out, _, err := queryShards(func(n int) ([]state.ActivityRef, error) {
		return st.shardRefs(ctx, q, b+strconv.Itoa(n))
	}, func(a, b state.ActivityRef) bool {
		if !a.StateTime.Equal(b.StateTime) {
			return a.StateTime.Before(b.StateTime)
		}
		return a.ActivityExecID < b.ActivityExecID
	}, limit)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list the retries due by %s: %w", end.UTC().Format(time.RFC3339), other)
	}
	return out, err
}

// RetryCycle implements state.DueRetryQueue.
func (st *Store) RetryCycle() int { return soonBuckets }
