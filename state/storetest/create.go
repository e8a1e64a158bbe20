package storetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

func testCreateAndRead(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "etl", DAG{"extract": nil, "transform": {"extract"}, "load": {"transform", "extract"}})
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}

	got, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(w.Exec) {
		t.Errorf("GetWorkflow:\n got %+v\nwant %+v", *got, w.Exec)
	}
	if !got.StartTime.Equal(w.Exec.StartTime) {
		t.Errorf("start time round trip: got %v, want %v", got.StartTime, w.Exec.StartTime)
	}

	req, err := st.GetRequest(testbin.Context(t), w.Request.WorkflowRequestID, w.Request.WorkflowName)
	if err != nil {
		t.Fatalf("GetRequest: %v", err)
	}
	if fmt.Sprint(*req) != fmt.Sprint(*w.Request) {
		t.Errorf("GetRequest:\n got %+v\nwant %+v", *req, *w.Request)
	}

	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatalf("Activities: %v", err)
	}
	if len(acts) != 3 {
		t.Fatalf("Activities: got %d, want 3", len(acts))
	}
	byName := map[string]*state.ActivityExec{}
	for _, a := range acts {
		byName[a.ActivityName] = a
	}
	for _, want := range w.Activities {
		a := byName[want.ActivityName]
		if a == nil {
			t.Fatalf("activity %s missing", want.ActivityName)
		}
		if a.State != state.Requested || a.ActivityExecID != want.ActivityExecID || !a.StateTime.Equal(want.StateTime) ||
			strings.Join(a.PendingDependencies, ",") != strings.Join(want.PendingDependencies, ",") ||
			!a.StartTime.IsZero() || !a.HeartbeatTime.IsZero() {
			t.Errorf("activity %s:\n got %+v\nwant %+v", want.ActivityName, *a, want)
		}
	}

	deps, err := st.Dependents(testbin.Context(t), Key(w, "extract").ActivityExecID)
	if err != nil {
		t.Fatalf("Dependents: %v", err)
	}
	var waiting []string
	for _, d := range deps {
		waiting = append(waiting, d.ActivityExecID)
	}
	sort.Strings(waiting)
	want := []string{Key(w, "load").ActivityExecID, Key(w, "transform").ActivityExecID}
	sort.Strings(want)
	if strings.Join(waiting, ",") != strings.Join(want, ",") {
		t.Errorf("Dependents(extract) = %v, want %v", waiting, want)
	}
}

func testCreateIsIdempotent(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "idem", DAG{"a": nil, "b": {"a"}})
	for i := 0; i < 2; i++ {
		if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
			t.Fatalf("CreateWorkflow #%d while REQUESTED: %v", i+1, err)
		}
	}

	// The same request for another execution answers with the first one.
	other := NewWorkflow(t, "idem", DAG{"a": nil})
	other.Request.WorkflowRequestID = w.Request.WorkflowRequestID
	err := st.CreateWorkflow(testbin.Context(t), other)
	var ee *state.ExistsError
	if !errors.As(err, &ee) || !errors.Is(err, state.ErrExists) {
		t.Fatalf("same request, other execution: got %v, want an *ExistsError", err)
	}
	if ee.WorkflowExecID != w.Exec.WorkflowExecID {
		t.Errorf("ExistsError names %s, want %s", ee.WorkflowExecID, w.Exec.WorkflowExecID)
	}
	if _, err := st.GetWorkflow(testbin.Context(t), other.Exec.WorkflowExecID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refused execution was written: GetWorkflow = %v", err)
	}

	// Once running, writing it again is refused and changes nothing.
	if _, err := st.UpdateWorkflow(testbin.Context(t), w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning,
	}); err != nil {
		t.Fatal(err)
	}
	move(t, st, Key(w, "a"), state.Requested, state.Queued)
	if err := st.CreateWorkflow(testbin.Context(t), w); !errors.Is(err, state.ErrExists) {
		t.Fatalf("CreateWorkflow after RUNNING: got %v, want ErrExists", err)
	}
	a, err := st.GetActivity(testbin.Context(t), Key(w, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if a.State != state.Queued {
		t.Errorf("activity a is %s after a refused re-create, want QUEUED", a.State)
	}
}

func testCreateBeyondOneTransaction(t *testing.T, h Harness) {
	st := h.New(t)
	// 150 activities in a chain: 150 + 149 items, more than one transaction.
	d := DAG{}
	for i := 0; i < 150; i++ {
		name := fmt.Sprintf("step-%03d", i)
		if i == 0 {
			d[name] = nil
		} else {
			d[name] = []string{fmt.Sprintf("step-%03d", i-1)}
		}
	}
	w := NewWorkflow(t, "long", d)
	// A first attempt that wrote only a consistent part (as a creator that
	// crashed after one transaction would)...
	partial := *w
	partial.Activities = w.Activities[:60]
	partial.Dependencies = w.Dependencies[:59]
	if err := st.CreateWorkflow(testbin.Context(t), &partial); err != nil {
		t.Fatalf("partial CreateWorkflow: %v", err)
	}
	// ...is completed by the retry.
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 150 {
		t.Errorf("Activities: got %d, want 150", len(acts))
	}
	for i := 0; i < 149; i++ {
		deps, err := st.Dependents(testbin.Context(t), Key(w, fmt.Sprintf("step-%03d", i)).ActivityExecID)
		if err != nil {
			t.Fatal(err)
		}
		if next := Key(w, fmt.Sprintf("step-%03d", i+1)).ActivityExecID; len(deps) != 1 || deps[0].ActivityExecID != next {
			t.Errorf("Dependents(step-%03d) = %+v, want step-%03d", i, deps, i+1)
		}
	}
}

func testCreateRefusesBadInput(t *testing.T, h Harness) {
	st := h.New(t)
	tests := []struct {
		name string
		edit func(w *state.NewWorkflow)
		want string
	}{
		{"no start time", func(w *state.NewWorkflow) { w.Exec.StartTime = time.Time{} }, "start time"},
		{"no state time", func(w *state.NewWorkflow) { w.Activities[0].StateTime = time.Time{} }, "state time"},
		{"duplicate activity", func(w *state.NewWorkflow) { w.Activities = append(w.Activities, w.Activities[0]) }, "twice"},
		{"pending without a dependency item", func(w *state.NewWorkflow) { w.Dependencies = nil }, "differ"},
		{"dependency of another workflow", func(w *state.NewWorkflow) { w.Dependencies[0].WorkflowExecID = "x" }, "must be an activity"},
		{"not REQUESTED", func(w *state.NewWorkflow) { w.Activities[1].State = state.Ready }, "must be REQUESTED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWorkflow(t, "bad", DAG{"a": nil, "b": {"a"}})
			tc.edit(w)
			err := st.CreateWorkflow(testbin.Context(t), w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
			if _, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("refused input was written: %v", err)
			}
		})
	}
}
