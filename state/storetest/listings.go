package storetest

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

func testStateIndex(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "index", DAG{"a": nil, "b": nil, "c": nil, "d": {"a"}})
	Create(t, st, w)
	before := time.Now()
	time.Sleep(5 * time.Millisecond)
	for _, n := range []string{"a", "b", "c"} {
		move(t, st, Key(w, n), state.Requested, state.Ready)
	}
	move(t, st, Key(w, "c"), state.Ready, state.Queued)

	// The index is eventually consistent: poll, bounded.
	want := []string{Key(w, "a").ActivityExecID, Key(w, "b").ActivityExecID}
	sort.Strings(want)
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range refs {
			if r.WorkflowExecID != w.Exec.WorkflowExecID || r.StateTime.Before(before) {
				t.Errorf("ref %+v: wrong workflow or state time", r)
			}
			got = append(got, r.ActivityExecID)
		}
		sort.Strings(got)
		if strings.Join(got, ",") == strings.Join(want, ",") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("READY activities: %v, want %v", got, want)
	}
	refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready, Limit: 1})
	if err != nil || len(refs) != 1 {
		t.Errorf("with Limit 1: %d refs, %v", len(refs), err)
	}
	refs, err = st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready, Before: before})
	if err != nil || len(refs) != 0 {
		t.Errorf("READY before the moves: %+v, %v; want none", refs, err)
	}
	// The state index is sparse: an activity that ended is in none of
	// its listings, and a terminal state is refused.
	if _, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Completed}); err == nil {
		t.Error("COMPLETED activities were listed; want an error: the index holds live states only")
	}
}
