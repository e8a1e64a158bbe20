package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// liveFinder is what workflow's settle asks a store that has it.
type liveFinder interface {
	AnyLive(ctx context.Context, workflowExecID string) (bool, error)
}

// testAnyLive: a store that tells whether a workflow has a live activity
// tells the truth, for that workflow alone, through every state up to
// the last activity's end.
func testAnyLive(t *testing.T, h Harness) {
	st := h.New(t)
	lf, ok := st.(liveFinder)
	if !ok {
		t.Skip("this store does not implement AnyLive")
	}
	live := func(w *state.NewWorkflow) bool {
		t.Helper()
		l, err := lf.AnyLive(testbin.Context(t), w.Exec.WorkflowExecID)
		if err != nil {
			t.Fatalf("AnyLive: %v", err)
		}
		return l
	}
	w := NewWorkflow(t, "live", DAG{"a": nil, "b": nil})
	other := NewWorkflow(t, "other", DAG{"x": nil})
	Create(t, st, w)
	Create(t, st, other)
	if !live(w) {
		t.Fatal("two REQUESTED activities: not live")
	}
	move(t, st, Key(w, "a"), state.Requested, state.Cancelled)
	if !live(w) {
		t.Fatal("one REQUESTED activity left: not live")
	}
	for _, s := range []state.ActivityState{state.Ready, state.Queued} {
		from := state.Requested
		if s == state.Queued {
			from = state.Ready
		}
		move(t, st, Key(w, "b"), from, s)
		if !live(w) {
			t.Fatalf("b %s: not live", s)
		}
	}
	if _, err := st.UpdateActivity(testbin.Context(t), Key(w, "b"), state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("o")}); err != nil {
		t.Fatal(err)
	}
	if !live(w) {
		t.Fatal("b RUNNING: not live")
	}
	if _, err := st.UpdateActivity(testbin.Context(t), Key(w, "b"), state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	if live(w) {
		t.Fatal("every activity terminal: live")
	}
	if !live(other) {
		t.Fatal("the other workflow's REQUESTED activity: not live")
	}
	// Many activities, one live among them wherever it is: the answer
	// does not depend on which the store happens to read first.
	dag := DAG{}
	for i := 0; i < 150; i++ {
		dag[fmt.Sprintf("n%03d", i)] = nil
	}
	big := NewWorkflow(t, "big", dag)
	Create(t, st, big)
	for i := 0; i < 150; i++ {
		if i != 97 {
			move(t, st, Key(big, fmt.Sprintf("n%03d", i)), state.Requested, state.Cancelled)
		}
	}
	for try := 0; try < 5; try++ {
		if !live(big) {
			t.Fatal("one REQUESTED activity among 149 CANCELLED: not live")
		}
	}
	move(t, st, Key(big, "n097"), state.Requested, state.Cancelled)
	if live(big) {
		t.Fatal("150 CANCELLED activities: live")
	}
}
