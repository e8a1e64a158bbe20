package dynamodb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestPoolCost measures what a pooled activity adds to its life: taking
// its slot and giving it back, each a consistent query of the pool's items
// and one conditional put of one shard, in a pool whose shard holds
// SlotsPerShard-1 other holders (a full shard's write is the dearest).
// The budget is 3 write units each (8 holders with long IDs, about 2.2
// KB): a shard's put rewrites at most
// SlotsPerShard holders.
func TestPoolCost(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	units := map[string]float64{}
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: func(c dynamodb.Capacity) {
		mu.Lock()
		defer mu.Unlock()
		units[c.Op] += c.Total
	}})
	ctx := context.Background()
	now := state.Truncate(time.Now())
	if _, err := state.SetPool(ctx, st, "cost", state.SlotsPerShard, "", now); err != nil {
		t.Fatal(err)
	}
	holder := func(i int) state.PoolHolder {
		return state.PoolHolder{ActivityExecID: fmt.Sprintf("load-the-warehouse-table-%02d::0b0e3c0f-6a4f-5b8e-9d1c-2f3a4b5c6d7e", i),
			WorkflowExecID: "nightly-etl::0b0e3c0f-6a4f-5b8e-9d1c-2f3a4b5c6d7e", WorkflowName: "nightly-etl", ActivityName: "load-the-warehouse-table",
			Slots: 1, Since: now, LeaseUntil: now.Add(state.PoolLease)}
	}
	for i := 1; i < state.SlotsPerShard; i++ {
		if err := state.AcquireSlots(ctx, st, "cost", holder(i)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	clear(units)
	mu.Unlock()
	h := holder(0)
	if err := state.AcquireSlots(ctx, st, "cost", h); err != nil {
		t.Fatal(err)
	}
	if err := state.ReleaseSlots(ctx, st, "cost", h.Key()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("take and give back one slot of a full shard: %.1f write units (PutPoolShard), %.1f read units (PoolItems)", units["PutPoolShard"], units["PoolItems"])
	if w := units["PutPoolShard"]; w <= 0 || w > 6 {
		t.Errorf("taking and giving back a slot cost %.1f write units, want at most 6", w)
	}
}
