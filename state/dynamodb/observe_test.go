package dynamodb_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestObserveSeesEveryCall: Options.Observe is told of each call with
// DynamoDB's name for it and how it ended, a refused conditional write
// included; Options.Capacity of what the store's operations consumed.
func TestObserveSeesEveryCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	codes := map[string]int{}
	capacity := map[string]float64{}
	st := dynamotest.NewStore(t, dynamodb.Options{
		Observe: func(c dynamodb.Call) {
			mu.Lock()
			defer mu.Unlock()
			if c.Took < 0 {
				t.Errorf("call %s took %s", c.Op, c.Took)
			}
			codes[c.Op+" "+c.Code]++
		},
		Capacity: func(c dynamodb.Capacity) {
			mu.Lock()
			defer mu.Unlock()
			capacity[c.Op] += c.Total
		},
	})
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	ctx := context.Background()
	k := storetest.Key(w, "a")
	if _, err := st.GetActivity(ctx, k); err != nil {
		t.Fatal(err)
	}
	// A move the contract refuses from REQUESTED: a refused condition.
	_, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed})
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("update from the wrong state: %v, want a conflict", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"GetItem OK", "PutItem OK", "UpdateItem ConditionalCheckFailedException"} {
		if codes[want] == 0 {
			t.Errorf("no call %q observed; saw %v", want, codes)
		}
	}
	if capacity["GetActivity"] <= 0 || capacity["CreateWorkflow"] <= 0 {
		t.Errorf("capacity by operation: %v, want GetActivity and CreateWorkflow above 0", capacity)
	}
}
