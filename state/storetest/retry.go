package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// testCreateActivity: a retry's next attempt is written once however many
// participants write it at once; it reads back with its attempt, links and
// delay; its claim keeps the attempt; the failed attempt gains the link
// and keeps its terminal state.
func testCreateActivity(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "retry", DAG{"a": nil, "b": {"a"}})
	Create(t, st, w)
	k := Key(w, "a")
	move(t, st, k, state.Requested, state.Ready)
	if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: claim("first")}); err != nil {
		t.Fatal(err)
	}
	failed, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "first", Exit: &state.Exit{Code: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if failed.Attempt != 1 {
		t.Errorf("a first attempt's claim wrote attempt %d, want 1", failed.Attempt)
	}

	now := state.Truncate(time.Now())
	next := state.ActivityExec{
		ActivityKey:  state.ActivityKey{ActivityExecID: state.RetryIDFor(k.ActivityExecID), WorkflowExecID: k.WorkflowExecID},
		WorkflowName: "retry", ActivityName: "a", State: state.Ready, StateTime: now,
		Attempt: 2, RetryOf: k.ActivityExecID, NotBefore: now.Add(1500 * time.Millisecond), Reason: "retry",
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := next
			errs[i] = st.CreateActivity(testbin.Context(t), &n)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, state.ErrConflict):
			if ce := conflict(t, err); ce.State != string(state.Ready) {
				t.Errorf("the losers learn state %q, want READY", ce.State)
			}
		default:
			t.Errorf("CreateActivity: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent CreateActivity calls wrote the item, want exactly 1", won, writers)
	}
	got, err := st.GetActivity(testbin.Context(t), next.ActivityKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.Attempt != 2 || got.RetryOf != k.ActivityExecID || !got.NotBefore.Equal(next.NotBefore) || got.State != state.Ready {
		t.Errorf("read back %+v, want attempt 2, retry_of %s, not_before %s, READY", got, k.ActivityExecID, next.NotBefore)
	}
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 3 {
		t.Errorf("the workflow lists %d activities, want 3 (a, its retry, b)", len(acts))
	}

	// The claim keeps the retry's attempt.
	claimed, err := st.UpdateActivity(testbin.Context(t), next.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: claim("second")})
	if err != nil {
		t.Fatal(err)
	}
	if claimed.Attempt != 2 {
		t.Errorf("after its claim the retry has attempt %d, want 2", claimed.Attempt)
	}

	// The link on the failed attempt changes nothing else.
	linked, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Failed}, RetriedBy: next.ActivityExecID})
	if err != nil {
		t.Fatal(err)
	}
	if linked.State != state.Failed || linked.RetriedBy != next.ActivityExecID || linked.ExitCode == nil || *linked.ExitCode != 1 {
		t.Errorf("linked: %s retried_by %q exit %v; want FAILED, linked, exit 1", linked.State, linked.RetriedBy, linked.ExitCode)
	}

	// Input the contract cannot run is refused, and nothing is written.
	for name, bad := range map[string]state.ActivityExec{
		"running":    {ActivityKey: state.ActivityKey{ActivityExecID: "a::" + "00000000-0000-0000-0000-000000000001", WorkflowExecID: k.WorkflowExecID}, ActivityName: "a", State: state.Running, StateTime: now, Attempt: 2},
		"no time":    {ActivityKey: state.ActivityKey{ActivityExecID: "a::" + "00000000-0000-0000-0000-000000000002", WorkflowExecID: k.WorkflowExecID}, ActivityName: "a", State: state.Ready, Attempt: 2},
		"no attempt": {ActivityKey: state.ActivityKey{ActivityExecID: "a::" + "00000000-0000-0000-0000-000000000003", WorkflowExecID: k.WorkflowExecID}, ActivityName: "a", State: state.Ready, StateTime: now},
	} {
		if err := st.CreateActivity(testbin.Context(t), &bad); err == nil || errors.Is(err, state.ErrConflict) {
			t.Errorf("%s: CreateActivity = %v, want a refusal", name, err)
		}
		if _, err := st.GetActivity(testbin.Context(t), bad.ActivityKey); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s: the refused item was written (%v)", name, err)
		}
	}
}
