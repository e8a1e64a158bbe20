// Package storetest is the conformance suite every state.Store passes. A
// backend's tests call Run with a Harness; the suite then checks the
// contract's guarantees against the real backend: one winner per claim, one
// count per dependency edge, fencing by owner, clear errors on missing and
// malformed items.
package storetest

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// Harness is what a backend gives the suite.
type Harness struct {
	// New returns an empty store with its schema installed, of this test
	// alone.
	New func(t *testing.T) state.Store
	// PutForeignActivity writes an activity_exec item as a foreign client
	// might, bypassing the Store's encoding. Values are string (String),
	// int or float64 (Number), bool (Boolean), []any (List) and []string
	// (String Set).
	PutForeignActivity func(t *testing.T, st state.Store, attrs map[string]any)
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"CreateAndRead", testCreateAndRead},
		{"CreateIsIdempotent", testCreateIsIdempotent},
		{"CreateBeyondOneTransaction", testCreateBeyondOneTransaction},
		{"ClaimRace", testClaimRace},
		{"IllegalTransitionsWriteNothing", testIllegalTransitions},
		{"ReplayedDependencyCountsOnce", testReplayedDependency},
		{"ResolveTheLastEdgeAndReady", testResolveAndReady},
		{"ConcurrentFanIn", testConcurrentFanIn},
		{"StaleOwnerIsFenced", testStaleOwner},
		{"NotFound", testNotFound},
		{"ForeignItems", testForeignItems},
		{"StateIndex", testStateIndex},
		{"WorkflowMoves", testWorkflowMoves},
		{"Preconditions", testPreconditions},
		{"TimeoutLosesToANewHeartbeat", testHeartbeatSeen},
		{"ClaimWritesTheFirstHeartbeat", testClaimWritesTheFirstHeartbeat},
		{"LandedWriteOnMalformedItem", testLandedWriteOnMalformedItem},
		{"CreateRefusesBadInput", testCreateRefusesBadInput},
		{"Expire", testExpire},
		{"CreateActivity", testCreateActivity},
		{"Data", testData},
		{"AnyLive", testAnyLive},
		{"WorkflowState", testWorkflowState},   // reads.go
		{"WaitingRetries", testWaitingRetries}, // retrywait.go
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// DAG describes a workflow for tests: activity name → names it waits on.
type DAG map[string][]string

// NewWorkflow builds everything CreateWorkflow writes for a DAG.
func NewWorkflow(t testing.TB, name string, d DAG) *state.NewWorkflow {
	t.Helper()
	now := state.Truncate(time.Now())
	execID := state.NewWorkflowExecID(name)
	reqID := state.NewWorkflowRequestID(name)
	w := &state.NewWorkflow{
		Request: &state.WorkflowRequest{WorkflowRequestID: reqID, WorkflowName: name, When: now,
			Source: "storetest", Manual: true, WorkflowExecID: execID},
		Exec: state.WorkflowExec{WorkflowExecID: execID, WorkflowName: name, State: state.WorkflowRequested,
			WorkflowRequestID: reqID, StartTime: now, Source: "storetest", Definition: `{"name":"` + name + `"}`},
	}
	names := make([]string, 0, len(d))
	for a := range d {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		id := state.ActivityExecIDFor(execID, a)
		act := state.ActivityExec{
			ActivityKey:  state.ActivityKey{ActivityExecID: id, WorkflowExecID: execID},
			WorkflowName: name, ActivityName: a, State: state.Requested, StateTime: now,
		}
		for i, up := range d[a] {
			if _, ok := d[up]; !ok {
				t.Fatalf("dag: %s waits on unknown %s", a, up)
			}
			upID := state.ActivityExecIDFor(execID, up)
			act.PendingDependencies = append(act.PendingDependencies, upID)
			w.Dependencies = append(w.Dependencies, state.Dependency{
				ID: state.DependencyID(id, i), ActivityExecID: id, WorkflowExecID: execID, DependentActivityExecID: upID,
			})
		}
		sort.Strings(act.PendingDependencies)
		w.Activities = append(w.Activities, act)
	}
	return w
}

// Key is the key of the named activity of w.
func Key(w *state.NewWorkflow, activity string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(w.Exec.WorkflowExecID, activity), WorkflowExecID: w.Exec.WorkflowExecID}
}

// Create writes w and moves the workflow to RUNNING.
func Create(t testing.TB, st state.Store, w *state.NewWorkflow) {
	t.Helper()
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning,
	}); err != nil {
		t.Fatalf("start workflow: %v", err)
	}
}

// move changes an activity's state without fencing, failing the test on error.
func move(t *testing.T, st state.Store, k state.ActivityKey, from, to state.ActivityState) *state.ActivityExec {
	t.Helper()
	a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{from}, To: to})
	if err != nil {
		t.Fatalf("move %s %s → %s: %v", k.ActivityExecID, from, to, err)
	}
	return a
}

func claim(owner string) *state.Claim {
	return &state.Claim{Owner: owner, Host: "host-" + owner, PID: 4242, HeartbeatEnabled: true,
		HeartbeatInterval: 15 * time.Second, HeartbeatTimeout: time.Minute}
}

func conflict(t *testing.T, err error) *state.ConflictError {
	t.Helper()
	var ce *state.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want a *state.ConflictError", err)
	}
	if !errors.Is(err, state.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = false", err)
	}
	return ce
}

// Helpers for the suites of what extends a store (simpleapi/inboxtest).

// Move changes an activity's state without fencing, failing the test on
// error.
func Move(t *testing.T, st state.Store, k state.ActivityKey, from, to state.ActivityState) *state.ActivityExec {
	t.Helper()
	return move(t, st, k, from, to)
}

// Claim is a claim by owner, with heartbeats.
func Claim(owner string) *state.Claim { return claim(owner) }

// Conflict fails the test unless err is a *state.ConflictError, and
// returns it.
func Conflict(t *testing.T, err error) *state.ConflictError {
	t.Helper()
	return conflict(t, err)
}
