package dynamodb_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func listed(t *testing.T, st *dynamodb.Store, s state.ActivityState) []string {
	t.Helper()
	refs, err := st.ActivitiesInState(context.Background(), state.ActivityQuery{State: s})
	if err != nil {
		t.Fatalf("ActivitiesInState(%s): %v", s, err)
	}
	var ids []string
	for _, r := range refs {
		ids = append(ids, r.ActivityExecID)
	}
	return ids
}

// TestStateIndexIsSparseAndSharded: the items of one state spread over
// the shards and come back merged, oldest first, within the limit; an
// item that ends leaves the index.
func TestStateIndexIsSparseAndSharded(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx := context.Background()
	d := storetest.DAG{}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		d[n] = nil
	}
	w := storetest.NewWorkflow(t, "sharded", d)
	storetest.Create(t, st, w)
	shards := map[string]bool{}
	base := time.Now().Truncate(time.Millisecond)
	for i, n := range []string{"h", "g", "f", "e", "d", "c", "b", "a"} { // h oldest
		k := storetest.Key(w, n)
		shards[dynamodb.StateShard(k.ActivityExecID, state.Ready)] = true
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Ready,
			At: base.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(shards) < 2 {
		t.Fatalf("8 activities fell in %d shard: the test needs several", len(shards))
	}
	refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range refs {
		got = append(got, strings.TrimPrefix(r.ActivityExecID, w.Exec.WorkflowExecID))
	}
	want := []string{storetest.Key(w, "h").ActivityExecID, storetest.Key(w, "g").ActivityExecID, storetest.Key(w, "f").ActivityExecID}
	for i := range want {
		want[i] = strings.TrimPrefix(want[i], w.Exec.WorkflowExecID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the 3 oldest READY across the shards: %v, want %v", got, want)
	}
	if n := len(listed(t, st, state.Requested)); n != 0 {
		t.Errorf("%d REQUESTED listed, want none: they all moved to READY", n)
	}
	k := storetest.Key(w, "a")
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Cancelled, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, st, state.Ready); len(got) != 7 || slices.Contains(got, k.ActivityExecID) {
		t.Errorf("READY after a was cancelled: %v, want the 7 others", got)
	}
	if _, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Completed}); err == nil {
		t.Error("a terminal state was listed; the sparse index holds live states only")
	}
}

// TestNoHotShardAt10000ActivitiesPerSecond: every activity enters and
// leaves each live state once, so each key of the index takes two writes
// per activity whose ID hashes to it. Over the IDs of one second at
// 10,000 activities a second, no key takes near DynamoDB's 1,000 write
// units a second per partition.
func TestNoHotShardAt10000ActivitiesPerSecond(t *testing.T) {
	perKey := map[string]int{}
	for i := range 10000 {
		wf := state.WorkflowExecIDForRequest("load", state.NewWorkflowRequestID("load"))
		id := state.ActivityExecIDFor(wf, "step-"+string(rune('a'+i%26)))
		perKey[dynamodb.StateShard(id, state.Ready)] += 2
	}
	hottest := 0
	for _, n := range perKey {
		hottest = max(hottest, n)
	}
	if len(perKey) != dynamodb.StateShards || hottest >= 1000 {
		t.Errorf("READY's writes over %d keys, the hottest %d a second; want %d keys, all under 1,000", len(perKey), hottest, dynamodb.StateShards)
	}
}

// TestWorkflowIndexesAreSharded: the workflows of one name and state
// spread over the shards of both workflow indexes and come back merged,
// newest first, within the limit and since the time asked; a workflow
// that settles moves to its new state's shard.
func TestWorkflowIndexesAreSharded(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx := context.Background()
	name := "wfshard-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:8]
	base := state.Truncate(time.Now()).Add(-time.Minute)
	var ids []string // oldest first
	shards := map[string]bool{}
	for i := range 8 {
		w := storetest.NewWorkflow(t, name, storetest.DAG{"a": nil})
		w.Exec.StartTime = base.Add(time.Duration(i) * time.Second)
		storetest.Create(t, st, w)
		ids = append(ids, w.Exec.WorkflowExecID)
		ss, _ := dynamodb.WorkflowShards(w.Exec.WorkflowExecID, name, state.WorkflowRunning)
		shards[ss] = true
	}
	if len(shards) < 2 {
		t.Fatalf("8 workflows fell in %d shard: the test needs several", len(shards))
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	for _, c := range []struct {
		q    state.WorkflowQuery
		want []string
	}{
		{state.WorkflowQuery{Name: name}, newest},
		{state.WorkflowQuery{Name: name, Limit: 3}, newest[:3]},
		{state.WorkflowQuery{Name: name, Since: base.Add(5 * time.Second)}, newest[:3]},
		{state.WorkflowQuery{Name: name, State: state.WorkflowRunning, Limit: 2}, newest[:2]},
	} {
		if got := listedWorkflows(t, st, c.q); !slices.Equal(got, c.want) {
			t.Errorf("Workflows(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
	if _, err := st.UpdateWorkflow(ctx, ids[7], state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted}); err != nil {
		t.Fatal(err)
	}
	running := listedWorkflows(t, st, state.WorkflowQuery{State: state.WorkflowRunning, Since: base})
	if slices.Contains(running, ids[7]) || !slices.Contains(running, ids[6]) {
		t.Errorf("RUNNING after the newest completed: %v, want the 7 others", running)
	}
	if got := listedWorkflows(t, st, state.WorkflowQuery{State: state.WorkflowCompleted, Since: base}); !slices.Equal(got, ids[7:]) {
		t.Errorf("COMPLETED: %v, want %v", got, ids[7:])
	}
}

// TestNoHotWorkflowShardAt5000WorkflowsPerSecond: 5,000 workflows a
// second, all of one name (the worst case for the name index). Each enters
// and leaves REQUESTED and RUNNING and enters its settled state, writing
// each of those keys of the state index about twice (BENCHMARKS.md
// measures 5 state index writes a workflow), and writes the name index
// at most 4 times (measured: 3.1): no key takes near 1,000 writes.
func TestNoHotWorkflowShardAt5000WorkflowsPerSecond(t *testing.T) {
	byState, byName := map[string]int{}, map[string]int{}
	for range 5000 {
		wf := state.WorkflowExecIDForRequest("load", state.NewWorkflowRequestID("load"))
		for _, s := range []state.WorkflowState{state.WorkflowRequested, state.WorkflowRunning, state.WorkflowCompleted} {
			ss, ns := dynamodb.WorkflowShards(wf, "load", s)
			byState[ss] += 2
			if s == state.WorkflowRequested {
				byName[ns] += 4
			}
		}
	}
	for what, perKey := range map[string]map[string]int{"state": byState, "name": byName} {
		hottest := 0
		for _, n := range perKey {
			hottest = max(hottest, n)
		}
		if hottest >= 1000 || len(perKey) < dynamodb.StateShards {
			t.Errorf("the %s index's writes over %d keys, the hottest %d a second; want all under 1,000", what, len(perKey), hottest)
		}
	}
}
