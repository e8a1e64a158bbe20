package workflow_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// minimal is a workflow of two activities, one waiting on the other.
const minimal = `
name: nightly-etl
activities:
  extract:
    command: ["sh", "-c", "echo extracting"]
  transform:
    depends_on: [extract]
    command: ["sh", "-c", "echo transforming"]
`

// TestStart: an execution is recorded RUNNING with its definition and its
// request, the activities that wait on nothing READY; a request ID starts
// at most one execution.
func TestStart(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	d, err := definition.Parse("etl.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	id, created, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: "nightly-2026-11-21", Source: "test"})
	if err != nil || !created {
		t.Fatalf("Start: %s %v %v", id, created, err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), id)
	if err != nil || wf.State != state.WorkflowRunning || wf.WorkflowRequestID != "nightly-2026-11-21" || wf.Definition != d.JSON() {
		t.Fatalf("workflow %+v, %v", wf, err)
	}
	req, err := st.GetRequest(testbin.Context(t), "nightly-2026-11-21", "nightly-etl")
	if err != nil || !req.Manual || req.WorkflowExecID != id {
		t.Errorf("request %+v, %v", req, err)
	}
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil || len(acts) != 2 {
		t.Fatalf("activities %v, %v", acts, err)
	}
	for _, a := range acts {
		want := state.Ready // waits on nothing: ready for the launchers
		if a.ActivityName == "transform" {
			want = state.Requested
		}
		if a.State != want || (a.ActivityName == "transform") != (len(a.PendingDependencies) == 1) {
			t.Errorf("activity %+v, want %s", *a, want)
		}
	}

	// The same request ID never starts a second execution.
	again, created, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: "nightly-2026-11-21"})
	if err != nil || again != id || created {
		t.Errorf("second start: %s %v %v; want %s, not created", again, created, err, id)
	}
	// Another request ID does.
	other, created, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil || other == id || !created {
		t.Errorf("start without a request ID: %s %v %v", other, created, err)
	}
}

// TestStartRefusesWhatTheStoreRefuses: a request whose execution ended
// is answered with that execution, not started again.
func TestStartRefusesWhatTheStoreRefuses(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	d, err := definition.Parse("etl.yaml", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled}); err != nil {
		t.Fatal(err)
	}
	// The request is answered with its execution, even though it ended.
	again, created, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: "r1"})
	if err != nil || created || again != id {
		t.Errorf("repeat after cancel: %s %v %v", again, created, err)
	}
}
