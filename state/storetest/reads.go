package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// testStateIndexForeign: the state index lists what another client wrote
// (hostile IDs, whole-second times) with its keys and time as written,
// and reports, naming the attribute, an item whose state time is out of
// the contract's range instead of listing it.
func testStateIndexForeign(t *testing.T, h Harness) {
	st := h.New(t)
	wf := state.NewWorkflowExecID("foreign<script>")
	good := state.ActivityExecIDFor(wf, "x\x1b[2J<script>alert(1)</script>")
	bad := state.ActivityExecIDFor(wf, "millis")
	h.PutForeignActivity(t, st, map[string]any{"activity_exec_id": good, "workflow_exec_id": wf, "state": "READY", "state_time_epoch": 1795300000})
	h.PutForeignActivity(t, st, map[string]any{"activity_exec_id": bad, "workflow_exec_id": wf, "state": "READY", "state_time_epoch": 1795300000000})
	deadline := time.Now().Add(10 * time.Second) // the index is eventually consistent
	for {
		refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready})
		skipped, other := state.Skipped(err)
		if other != nil {
			t.Fatal(other)
		}
		var found bool
		for _, r := range refs {
			if r.ActivityExecID == bad {
				t.Fatalf("an item whose state time is out of range was listed: %+v", r)
			}
			if r.ActivityExecID == good {
				found = true
				if r.WorkflowExecID != wf || !r.StateTime.Equal(time.Unix(1795300000, 0)) {
					t.Fatalf("listed %+v, want workflow %q at %v", r, wf, time.Unix(1795300000, 0).UTC())
				}
			}
		}
		reported := len(skipped) == 1 && strings.Contains(skipped[0].Error(), "state_time_epoch")
		if found && reported {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed %+v, skipped %v: want the foreign item listed and the out-of-range one reported by its attribute", refs, skipped)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
