package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

func testWorkflowMoves(t *testing.T, h Harness) {
	st := h.New(t)
	w1 := NewWorkflow(t, "moves", DAG{"a": nil})
	Create(t, st, w1)
	time.Sleep(5 * time.Millisecond)
	w2 := NewWorkflow(t, "moves", DAG{"a": nil})
	Create(t, st, w2)

	_, err := st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowRequested})
	var te *state.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("RUNNING → REQUESTED: got %v, want a *TransitionError", err)
	}
	done, err := st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed, Reason: "activity a FAILED"})
	if err != nil {
		t.Fatal(err)
	}
	if done.State != state.WorkflowFailed || done.EndTime.IsZero() || done.Reason != "activity a FAILED" {
		t.Errorf("settled workflow: %+v", *done)
	}
	_, err = st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted})
	if ce := conflict(t, err); ce.State != string(state.WorkflowFailed) {
		t.Errorf("second settle conflict names %s, want FAILED", ce.State)
	}

	var running []*state.WorkflowExec
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err = st.Workflows(testbin.Context(t), state.WorkflowQuery{State: state.WorkflowRunning})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(running) != 1 || running[0].WorkflowExecID != w2.Exec.WorkflowExecID {
		t.Errorf("RUNNING workflows: %+v, want only %s", running, w2.Exec.WorkflowExecID)
	}
	failed, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{State: state.WorkflowFailed, Since: w1.Exec.StartTime})
	if err != nil || len(failed) != 1 || failed[0].Reason != "activity a FAILED" {
		t.Errorf("FAILED workflows since its start: %+v, %v", failed, err)
	}

	// By name, any state, newest first; by name and state; every state.
	time.Sleep(5 * time.Millisecond) // a start time of its own: newest first must be decidable
	other := NewWorkflow(t, "other", DAG{"a": nil})
	Create(t, st, other)
	byName, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: "moves"})
	if err != nil || len(byName) != 2 || byName[0].WorkflowExecID != w2.Exec.WorkflowExecID || byName[1].State != state.WorkflowFailed {
		t.Errorf("workflows named moves: %+v, %v; want w2 then the FAILED w1", byName, err)
	}
	for _, w := range byName {
		if w.Definition != "" {
			t.Errorf("a listing carries the definition of %s", w.WorkflowExecID)
		}
	}
	named, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: "moves", State: state.WorkflowFailed})
	if err != nil || len(named) != 1 || named[0].WorkflowExecID != w1.Exec.WorkflowExecID {
		t.Errorf("FAILED workflows named moves: %+v, %v", named, err)
	}
	all, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Limit: 2})
	if err != nil || len(all) != 2 || all[0].WorkflowExecID != other.Exec.WorkflowExecID {
		t.Errorf("the 2 newest workflows: %+v, %v; want other first", all, err)
	}
}

func testExpire(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "old", DAG{"a": nil, "b": {"a"}})
	Create(t, st, w)
	at := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second).UTC()
	if err := st.Expire(testbin.Context(t), w.Exec.WorkflowExecID, at); err != nil {
		t.Fatalf("Expire: %v", err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || !wf.Expires.Equal(at) {
		t.Errorf("workflow expires %v (%v), want %v", wf.Expires, err, at)
	}
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || len(acts) != 2 {
		t.Fatal(acts, err)
	}
	for _, a := range acts {
		if !a.Expires.Equal(at) {
			t.Errorf("activity %s expires %v, want %v", a.ActivityName, a.Expires, at)
		}
	}
	if err := st.Expire(testbin.Context(t), state.NewWorkflowExecID("ghost"), at); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Expire of a missing workflow: %v, want ErrNotFound", err)
	}
}
