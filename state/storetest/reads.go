package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// workflowStater is what a launcher's pass asks of a store that reads a
// workflow's state without the rest of its item.
type workflowStater interface {
	WorkflowState(ctx context.Context, id string) (state.WorkflowState, error)
}

// testWorkflowState: a workflow's state read alone is its item's, moves
// included; a missing workflow is ErrNotFound and an ID that is not one is
// another error.
func testWorkflowState(t *testing.T, h Harness) {
	st := h.New(t)
	ws, ok := st.(workflowStater)
	if !ok {
		t.Fatalf("%T reads no workflow state alone (WorkflowState)", st)
	}
	w := NewWorkflow(t, "state", DAG{"a": nil})
	Create(t, st, w)
	id := w.Exec.WorkflowExecID
	for _, to := range []state.WorkflowState{"", state.WorkflowFailed} {
		if to != "" {
			prev, err := st.GetWorkflow(testbin.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{prev.State}, To: to, Reason: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		want, err := st.GetWorkflow(testbin.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ws.WorkflowState(testbin.Context(t), id)
		if err != nil || got != want.State {
			t.Fatalf("WorkflowState = %q, %v; the item holds %q", got, err, want.State)
		}
	}
	if _, err := ws.WorkflowState(testbin.Context(t), state.NewWorkflowExecID("ghost")); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("WorkflowState of a missing workflow: %v, want ErrNotFound", err)
	}
	if _, err := ws.WorkflowState(testbin.Context(t), "not-an-id"); err == nil || errors.Is(err, state.ErrNotFound) {
		t.Errorf("WorkflowState(not-an-id): got %v, want an error about the ID", err)
	}
}
