package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// testData: the data contract's attributes (a workflow's params, an
// activity's output and progress) are written and read back; oversize
// ones are refused before anything is written; a foreign client's item
// with them, or without them, reads as expected.
func testData(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "data", DAG{"a": nil})
	w.Exec.Params = `{"base":"1"}`
	Create(t, st, w)
	wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || wf.Params != `{"base":"1"}` {
		t.Fatalf("workflow params %q (%v), want them as written", wf.Params, err)
	}
	k := Key(w, "a")
	move(t, st, k, state.Requested, state.Ready)
	if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: claim("me")}); err != nil {
		t.Fatal(err)
	}

	at := state.Truncate(time.Now())
	a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: "me",
		Beat: true, At: at, Progress: `{"done": 1}`})
	if err != nil || a.Progress != `{"done": 1}` || !a.ProgressTime.Equal(at) || !a.HeartbeatTime.Equal(at) || a.State != state.Running {
		t.Fatalf("a beat with progress: %+v, %v", a, err)
	}
	for _, c := range []state.ActivityChange{
		{Progress: strings.Repeat("p", state.MaxProgress+1), Beat: true},
		{Output: `{"s":"` + strings.Repeat("o", state.MaxOutput) + `"}`, To: state.Completed},
	} {
		c.From, c.Owner = []state.ActivityState{state.Running}, "me"
		if _, err := st.UpdateActivity(testbin.Context(t), k, c); err == nil || !strings.Contains(err.Error(), "more than the") {
			t.Errorf("an oversize write: %v; want it refused", err)
		}
	}
	a, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: "me",
		To: state.Completed, Exit: &state.Exit{}, Output: `{"n":41}`})
	if err != nil || a.State != state.Completed || a.Output != `{"n":41}` || a.Progress != `{"done": 1}` {
		t.Fatalf("completing with an output: %+v, %v", a, err)
	}
	if got, err := st.GetActivity(testbin.Context(t), k); err != nil || got.Output != `{"n":41}` || !got.ProgressTime.Equal(at) {
		t.Errorf("read back: %+v, %v", got, err)
	}

	if h.PutForeignActivity == nil {
		t.Fatal("the harness must provide PutForeignActivity")
	}
	fw := state.NewWorkflowExecID("foreign")
	for _, tc := range []struct {
		name     string
		attrs    map[string]any
		wantAttr string
	}{
		{"without the data attributes", map[string]any{}, ""},
		{"with them", map[string]any{"output": `{"x":1}`, "progress": "half", "progress_time_epoch": 1795300000.5}, ""},
		{"output is a number", map[string]any{"output": 3}, "output"},
		{"progress time is text", map[string]any{"progress": "half", "progress_time_epoch": "now"}, "progress_time_epoch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]any{"activity_exec_id": state.ActivityExecIDFor(fw, strings.ReplaceAll(tc.name, " ", "-")),
				"workflow_exec_id": fw, "state": "COMPLETED"}
			for k, v := range tc.attrs {
				m[k] = v
			}
			h.PutForeignActivity(t, st, m)
			a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: m["activity_exec_id"].(string), WorkflowExecID: fw})
			if tc.wantAttr != "" {
				var ie *state.DecodeError
				if !asItemError(err, &ie) || ie.Attr != tc.wantAttr {
					t.Errorf("got %v, want an *ItemError naming %s", err, tc.wantAttr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tc.attrs["output"]; ok && (a.Output != `{"x":1}` || a.Progress != "half" || a.ProgressTime.Unix() != 1795300000) {
				t.Errorf("read %q, %q at %v", a.Output, a.Progress, a.ProgressTime)
			}
			if _, ok := tc.attrs["output"]; !ok && (a.Output != "" || a.Progress != "" || !a.ProgressTime.IsZero()) {
				t.Errorf("an item without data reads output %q, progress %q at %v", a.Output, a.Progress, a.ProgressTime)
			}
		})
	}
}

func asItemError(err error, target **state.DecodeError) bool { return errors.As(err, target) }
