package dynamodb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestHeartbeatWithProgressCostsOneWriteUnit checks the data contract's
// budget: a heartbeat that carries a command's progress is one conditional
// write of one write unit, on no index, as a bare heartbeat is. DynamoDB
// bills a write by the item's size (the larger of before and after, per
// started KB), so the test uses a realistic running item — the names and
// IDs whimbrel start writes, a host, a pid — and a progress of the size a
// command typically reports.
func TestHeartbeatWithProgressCostsOneWriteUnit(t *testing.T) {
	t.Parallel()
	var log capacityLog
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: log.record})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	execID := state.NewWorkflowExecID("nightly-etl")
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(execID, "transform-orders"), WorkflowExecID: execID}
	now := time.Now()
	if err := st.CreateWorkflow(ctx, &state.NewWorkflow{
		Exec: state.WorkflowExec{WorkflowExecID: execID, WorkflowName: "nightly-etl", State: state.WorkflowRequested, StartTime: now,
			Params: `{"date":"2024-01-31"}`},
		Activities: []state.ActivityExec{{ActivityKey: k, WorkflowName: "nightly-etl", ActivityName: "transform-orders", State: state.Requested, StateTime: now}},
	}); err != nil {
		t.Fatal(err)
	}
	const owner = "3f1d5c1e-8a59-4c7c-9d1e-3a3b9f0c2d11"
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: "it waits on nothing"},
		{From: []state.ActivityState{state.Ready}, To: state.Queued, LaunchedAs: "pid:4194304"},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{
			Owner: owner, Host: "ip-10-0-12-34.eu-west-1.compute.internal", PID: 4194304,
			HeartbeatEnabled: true, HeartbeatInterval: 15 * time.Second, HeartbeatTimeout: time.Minute}},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	log.take()

	progress := `{"done": 41000, "of": 100000, "stage": "` + strings.Repeat("x", 200) + `"}`
	for i := 0; i < 3; i++ {
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: owner,
			Beat: true, Progress: progress, At: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if a.Progress != progress || a.ProgressTime.IsZero() || a.HeartbeatTime.IsZero() {
			t.Fatalf("after the beat: progress %q at %v, heartbeat %v", a.Progress, a.ProgressTime, a.HeartbeatTime)
		}
	}
	for _, c := range log.take() {
		if c.Total != 1 || c.Table != 1 || len(c.Indexes) != 0 {
			t.Errorf("a heartbeat with %d bytes of progress consumed %+v, want exactly 1 write unit on the table and none on any index", len(progress), c)
		}
	}

	// Measured, not asserted: the largest progress that keeps the beat
	// within one write unit on this item (docs/data.md quotes it).
	fits := 0
	for n := 64; n <= state.MaxProgress; n += 64 {
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: owner,
			Beat: true, Progress: strings.Repeat("p", n), At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if c := log.take(); len(c) == 1 && c[0].Total == 1 {
			fits = n
		}
	}
	t.Logf("on this item a heartbeat stays 1 write unit with up to %d bytes of progress (of the %d allowed)", fits, state.MaxProgress)
}
