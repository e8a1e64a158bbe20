package workflow_test

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// end runs an activity through the contract to the given terminal state.
func end(t *testing.T, st state.Store, k state.ActivityKey, to state.ActivityState) *state.ActivityExec {
	t.Helper()
	a, err := st.GetActivity(testbin.Context(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if a.State == state.Requested {
		if _, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Ready}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: &state.Claim{Owner: "o"}}); err != nil {
		t.Fatal(err)
	}
	if a, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to, Owner: "o"}); err != nil {
		t.Fatal(err)
	}
	return a
}

func states(t *testing.T, st state.Store, w *state.NewWorkflow) map[string]state.ActivityState {
	t.Helper()
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]state.ActivityState{}
	for _, a := range acts {
		out[a.ActivityName] = a.State
	}
	return out
}

// TestDiamondReadiesOnce races the advances of B and C many times: D is
// readied by exactly one of them, every time.
func TestDiamondReadiesOnce(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	for round := 0; round < 50; round++ {
		w := storetest.NewWorkflow(t, "diamond", storetest.DAG{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
		storetest.Create(t, st, w)
		a := end(t, st, storetest.Key(w, "a"), state.Completed)
		if res, err := workflow.Advance(testbin.Context(t), st, a, nil); err != nil || len(res.Readied) != 2 {
			t.Fatalf("advance after a: %+v, %v", res, err)
		}
		b := end(t, st, storetest.Key(w, "b"), state.Completed)
		c := end(t, st, storetest.Key(w, "c"), state.Completed)

		var wg sync.WaitGroup
		results := make([]workflow.Result, 4)
		for i, x := range []*state.ActivityExec{b, c, b, c} { // each advance also replayed
			wg.Add(1)
			go func(i int, x *state.ActivityExec) {
				defer wg.Done()
				var err error
				if results[i], err = workflow.Advance(testbin.Context(t), st, x, nil); err != nil {
					t.Error(err)
				}
			}(i, x)
		}
		wg.Wait()
		readied := 0
		for _, r := range results {
			readied += len(r.Readied)
		}
		if got := states(t, st, w)["d"]; got != state.Ready || readied != 1 {
			t.Fatalf("round %d: d is %s, readied %d times; want READY once", round, got, readied)
		}
	}
}

func TestFailureCancelsEverythingDownstream(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "chain", storetest.DAG{
		"a": nil, "b": {"a"}, "c": {"b"}, "d": {"b", "e"}, "e": nil, "f": {"e"},
	})
	storetest.Create(t, st, w)
	e := end(t, st, storetest.Key(w, "e"), state.Completed)
	if _, err := workflow.Advance(testbin.Context(t), st, e, nil); err != nil {
		t.Fatal(err)
	}
	f := end(t, st, storetest.Key(w, "f"), state.Completed)
	if _, err := workflow.Advance(testbin.Context(t), st, f, nil); err != nil {
		t.Fatal(err)
	}

	a := end(t, st, storetest.Key(w, "a"), state.TimedOut)
	res, err := workflow.Advance(testbin.Context(t), st, a, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cancelled []string
	for _, id := range res.Cancelled {
		name, _, _ := state.SplitID(id)
		cancelled = append(cancelled, name)
	}
	sort.Strings(cancelled)
	if strings.Join(cancelled, ",") != "b,c,d" || res.Settled != state.WorkflowFailed {
		t.Errorf("advance cancelled %v and settled %q; want b,c,d and FAILED", cancelled, res.Settled)
	}
	want := map[string]state.ActivityState{"a": state.TimedOut, "b": state.Cancelled, "c": state.Cancelled,
		"d": state.Cancelled, "e": state.Completed, "f": state.Completed}
	got := states(t, st, w)
	for n, s := range want {
		if got[n] != s {
			t.Errorf("%s is %s, want %s", n, got[n], s)
		}
	}
	d, err := st.GetActivity(testbin.Context(t), storetest.Key(w, "d"))
	if err != nil || !strings.Contains(d.Reason, "upstream b ended CANCELLED") {
		t.Errorf("d's reason %q should name the upstream that ended (%v)", d.Reason, err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || wf.State != state.WorkflowFailed || wf.Reason != "a TIMED_OUT" {
		t.Errorf("workflow %+v (%v), want FAILED because of a", wf, err)
	}

	// Repeating the advance changes nothing and reports nothing new.
	res, err = workflow.Advance(testbin.Context(t), st, a, nil)
	if err != nil || len(res.Cancelled) != 0 || res.Settled != "" {
		t.Errorf("repeated advance: %+v, %v", res, err)
	}
}

func TestSettle(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	tests := []struct {
		name  string
		ends  map[string]state.ActivityState
		want  state.WorkflowState
		cause string
	}{
		{"all completed", map[string]state.ActivityState{"x": state.Completed, "y": state.Completed}, state.WorkflowCompleted, "every activity completed"},
		{"one failed", map[string]state.ActivityState{"x": state.Completed, "y": state.Failed}, state.WorkflowFailed, "y FAILED"},
		{"one still running", map[string]state.ActivityState{"x": state.Completed}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := storetest.NewWorkflow(t, "settle", storetest.DAG{"x": nil, "y": nil})
			storetest.Create(t, st, w)
			for n, s := range tc.ends {
				end(t, st, storetest.Key(w, n), s)
			}
			got, err := workflow.Settle(testbin.Context(t), st, w.Exec.WorkflowExecID, nil)
			if err != nil || got != tc.want {
				t.Fatalf("Settle = %q, %v; want %q", got, err, tc.want)
			}
			wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && (wf.State != tc.want || wf.Reason != tc.cause) {
				t.Errorf("workflow %s %q, want %s %q", wf.State, wf.Reason, tc.want, tc.cause)
			}
			if again, err := workflow.Settle(testbin.Context(t), st, w.Exec.WorkflowExecID, nil); err != nil || again != "" {
				t.Errorf("second Settle = %q, %v; want nothing", again, err)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "cancel", storetest.DAG{"done": nil, "running": nil, "queued": nil, "waiting": {"running"}})
	storetest.Create(t, st, w)
	end(t, st, storetest.Key(w, "done"), state.Completed)
	k := storetest.Key(w, "running")
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o"}},
	} {
		if _, err := st.UpdateActivity(testbin.Context(t), k, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateActivity(testbin.Context(t), storetest.Key(w, "queued"), state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Cancel(testbin.Context(t), st, w.Exec.WorkflowExecID, "by test", nil)
	if err != nil || !res.Workflow || len(res.Pending) != 2 || len(res.Running) != 1 {
		t.Fatalf("Cancel: %+v %v", res, err)
	}
	want := map[string]state.ActivityState{"done": state.Completed, "running": state.CancelledRunning, "queued": state.Cancelled, "waiting": state.Cancelled}
	for n, s := range states(t, st, w) {
		if s != want[n] {
			t.Errorf("%s is %s, want %s", n, s, want[n])
		}
	}
	// Again: nothing more to do, no error.
	if res, err := workflow.Cancel(testbin.Context(t), st, w.Exec.WorkflowExecID, "again", nil); err != nil || res.Workflow || len(res.Pending)+len(res.Running) != 0 {
		t.Errorf("second Cancel: %+v %v", res, err)
	}
	// A completed workflow is reported, not changed.
	done := storetest.NewWorkflow(t, "finished", storetest.DAG{"a": nil})
	storetest.Create(t, st, done)
	a := end(t, st, storetest.Key(done, "a"), state.Completed)
	if _, err := workflow.Advance(testbin.Context(t), st, a, nil); err != nil {
		t.Fatal(err)
	}
	_, err = workflow.Cancel(testbin.Context(t), st, done.Exec.WorkflowExecID, "", nil)
	var ce *state.ConflictError
	if !errors.As(err, &ce) || ce.State != string(state.WorkflowCompleted) {
		t.Errorf("cancel of a completed workflow: %v, want a conflict naming COMPLETED", err)
	}
}

// TestRetention: a settled execution's items expire after the definition's
// retention.
func TestRetention(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	d, err := definition.Parse("r.yaml", []byte("name: kept\nretention: 30d\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := end(t, st, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}, state.Completed)
	if res, err := workflow.Advance(testbin.Context(t), st, a, nil); err != nil || res.Settled != state.WorkflowCompleted {
		t.Fatalf("advance: %+v %v", res, err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if want := wf.EndTime.Add(30 * 24 * time.Hour); wf.Expires.Sub(want).Abs() > time.Second {
		t.Errorf("workflow expires %v, want %v", wf.Expires, want)
	}
	if a, _ := st.GetActivity(testbin.Context(t), a.ActivityKey); a.Expires.IsZero() {
		t.Error("the activity does not expire")
	}
}
