package dynamodb

import (
	"context"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Parked waiters: state.PoolQueue on DynamoDB. A parked activity keeps its
// state and its state_time_epoch, and its state_shard names its pool
// instead of a READY shard ("POOL#warehouse"): the same state index then
// lists a pool's parked waiters oldest first under one key, and the READY
// shards the launchers read hold only what they may launch. No index is
// added. One pool's key takes the writes of its waiters being parked and
// put back, which the rate its slots turn over bounds.

var _ state.PoolQueue = (*Store)(nil)

// parkPrefix starts the state_shard of a parked waiter.
const parkPrefix = "POOL#"

// ParkShard is the state_shard of a READY activity parked in pool's queue.
func ParkShard(pool string) string { return parkPrefix + pool }

// Park implements state.PoolQueue.
func (st *Store) Park(ctx context.Context, k state.ActivityKey, pool string) error {
	return st.park(ctx, "Park", k, attr.Update{Set: attr.Item{state.AttrPoolWait: attr.S(pool), AttrStateShard: attr.S(ParkShard(pool))}})
}

// Unpark implements state.PoolQueue.
func (st *Store) Unpark(ctx context.Context, k state.ActivityKey) error {
	return st.park(ctx, "Unpark", k, attr.Update{Set: attr.Item{AttrStateShard: attr.S(StateShard(k.ActivityExecID, state.Ready))},
		Remove: []string{state.AttrPoolWait}})
}

func (st *Store) park(ctx context.Context, op string, k state.ActivityKey, upd attr.Update) error {
	cond := attr.Cond{States: []string{string(state.Ready)}}
	m, old, err := st.update(ctx, op, TableActivityExec, toAVItem(attr.ActivityKey(k)), cond, upd)
	if err != nil {
		return fmt.Errorf("%s activity %s: %w", op, k.ActivityExecID, err)
	}
	if m == nil {
		return attr.Conflict("activity", st.prefix+TableActivityExec, k.ActivityExecID, cond, old)
	}
	return nil
}

// Parked implements state.PoolQueue: one query of the state index.
func (st *Store) Parked(ctx context.Context, pool string, limit int) ([]state.ActivityRef, error) {
	var out []state.ActivityRef
	skips := st.undecoded.NewSkips()
	err := st.query(ctx, "Parked", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
		IndexName:                 aws.String(indexStateShard),
		KeyConditionExpression:    aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": AttrStateShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(ParkShard(pool))},
		ScanIndexForward:          aws.Bool(true),
	}, limit, func(m item) error {
		ref, err := attr.DecodeRef(st.prefix+TableActivityExec, fromAVItem(m))
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, ref)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the parked waiters of pool %s: %w", pool, err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].StateTime.Equal(out[j].StateTime) {
			return out[i].StateTime.Before(out[j].StateTime)
		}
		return out[i].ActivityExecID < out[j].ActivityExecID
	})
	return out, skips.Err()
}
