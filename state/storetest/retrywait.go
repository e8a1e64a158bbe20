package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// testWaitingRetries: a READY retry whose not_before is a minute or more
// after its state time is written parked, out of the READY listing and in
// the waiting retries'; one due in 30 s is parked too, out of the READY
// listing, and listed as due by the window its not_before falls in and
// not by the one before; one due in 3 s is not parked. Putting back
// changes neither state nor times, may be repeated, and is refused once
// the retry moved on.
func testWaitingRetries(t *testing.T, h Harness) {
	st := h.New(t)
	q, ok := st.(state.RetryQueue)
	if !ok {
		t.Fatalf("%T is not a state.RetryQueue", st)
	}
	ctx := testbin.Context(t)
	w := NewWorkflow(t, "retries", DAG{"a": nil})
	Create(t, st, w)
	at := time.Now().UTC().Truncate(time.Second) // whole seconds, as a stranger writes
	retry := func(id string, delay time.Duration) state.ActivityKey {
		k := state.ActivityKey{ActivityExecID: id, WorkflowExecID: w.Exec.WorkflowExecID}
		a := &state.ActivityExec{ActivityKey: k, WorkflowName: "retries", ActivityName: "a", State: state.Ready,
			StateTime: at, NotBefore: at.Add(delay), Attempt: 2, RetryOf: Key(w, "a").ActivityExecID}
		if err := st.CreateActivity(ctx, a); err != nil {
			t.Fatalf("create retry %q: %v", id, err)
		}
		return k
	}
	long := retry("a::00000000-0000-4000-8000-000000000001", 2*time.Minute)
	short := retry("a::00000000-0000-4000-8000-000000000002", 3*time.Second)
	soon := retry("a::00000000-0000-4000-8000-000000000005", 30*time.Second)

	ready := func() map[state.ActivityKey]bool {
		refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready})
		if err != nil {
			t.Fatal(err)
		}
		out := map[state.ActivityKey]bool{}
		for _, r := range refs {
			out[r.ActivityKey] = true
		}
		return out
	}
	waiting := func() map[state.ActivityKey]bool {
		refs, err := q.WaitingRetries(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[state.ActivityKey]bool{}
		for _, r := range refs {
			if !r.StateTime.Equal(at) {
				t.Errorf("waiting retry %q has state time %v, want %v", r.ActivityExecID, r.StateTime, at)
			}
			out[r.ActivityKey] = true
		}
		return out
	}
	// The index is eventually consistent: poll, bounded.
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eventually("the long retry waits and the short one is READY", func() bool {
		r, wt := ready(), waiting()
		return !r[long] && wt[long] && r[short] && !wt[short] && !r[soon]
	})
	dq, ok := st.(state.DueRetryQueue)
	if !ok {
		t.Fatalf("%T is not a state.DueRetryQueue", st)
	}
	due := func(end time.Time) map[state.ActivityKey]bool {
		refs, err := dq.DueRetries(ctx, end, 100)
		if err != nil {
			t.Fatal(err)
		}
		out := map[state.ActivityKey]bool{}
		for _, r := range refs {
			out[r.ActivityKey] = true
		}
		return out
	}
	eventually("the retry due in 30 s is listed by its window, and no other", func() bool {
		d := due(at.Add(30 * time.Second).Add(state.RetryWindow))
		return d[soon] && !d[long] && !d[short]
	})
	if d := due(at.Add(30 * time.Second)); d[soon] || d[long] {
		t.Errorf("the window before its not_before lists the retry due in 30 s, or the one due in 2 minutes: %v", d)
	}

	for range 2 { // putting back twice is putting back once
		if err := q.UnparkRetry(ctx, long); err != nil {
			t.Fatalf("put back: %v", err)
		}
	}
	eventually("the retry put back is READY and no longer waits", func() bool {
		return ready()[long] && !waiting()[long]
	})
	a, err := st.GetActivity(ctx, long)
	if err != nil || a.State != state.Ready || !a.StateTime.Equal(at) || !a.NotBefore.Equal(at.Add(2*time.Minute)) {
		t.Fatalf("after the put back: %+v %v; want READY with its state time and not_before unchanged", a, err)
	}

	// One that moved on is not put back.
	parked := retry("a::00000000-0000-4000-8000-000000000003", time.Hour)
	move(t, st, parked, state.Ready, state.Queued)
	if err := q.UnparkRetry(ctx, parked); !errors.Is(err, state.ErrConflict) {
		t.Errorf("put back a QUEUED retry: %v, want a conflict", err)
	}
	eventually("a QUEUED retry is in neither listing", func() bool {
		return !ready()[parked] && !waiting()[parked]
	})
	if err := q.UnparkRetry(ctx, state.ActivityKey{ActivityExecID: "a::00000000-0000-4000-8000-000000000004", WorkflowExecID: w.Exec.WorkflowExecID}); err == nil {
		t.Errorf("put back a retry that does not exist: no error")
	}
}
