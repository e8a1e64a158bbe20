package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

func testNotFound(t *testing.T, h Harness) {
	st := h.New(t)
	missing := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor("x::1", "ghost"), WorkflowExecID: state.NewWorkflowExecID("x")}
	checks := map[string]error{}
	_, checks["GetActivity"] = st.GetActivity(testbin.Context(t), missing)
	_, checks["UpdateActivity"] = st.UpdateActivity(testbin.Context(t), missing, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Queued})
	checks["Heartbeat"] = st.Heartbeat(testbin.Context(t), missing, "o", time.Now())
	_, _, checks["ResolveDependency"] = st.ResolveDependency(testbin.Context(t), missing, "up")
	_, checks["GetWorkflow"] = st.GetWorkflow(testbin.Context(t), missing.WorkflowExecID)
	_, checks["UpdateWorkflow"] = st.UpdateWorkflow(testbin.Context(t), missing.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed})
	_, checks["GetRequest"] = st.GetRequest(testbin.Context(t), "x::nope", "x")
	for op, err := range checks {
		if !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s on a missing item: got %v, want ErrNotFound", op, err)
		}
	}
	acts, err := st.Activities(testbin.Context(t), missing.WorkflowExecID)
	if err != nil || len(acts) != 0 {
		t.Errorf("Activities of a missing workflow: %v, %v; want none", acts, err)
	}
	if _, err := st.GetWorkflow(testbin.Context(t), "not-an-id"); err == nil || errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetWorkflow(not-an-id): got %v, want an error about the ID", err)
	}
}

func testForeignItems(t *testing.T, h Harness) {
	if h.PutForeignActivity == nil {
		t.Fatal("the harness must provide PutForeignActivity")
	}
	st := h.New(t)
	wf := state.NewWorkflowExecID("foreign")
	base := func(name string) map[string]any {
		return map[string]any{
			"activity_exec_id": state.ActivityExecIDFor(wf, name),
			"workflow_exec_id": wf,
			"state":            "RUNNING",
		}
	}
	tests := []struct {
		name     string
		edit     func(map[string]any)
		wantAttr string // "" means the item must decode
	}{
		{"minimal", func(map[string]any) {}, ""},
		{"seed list times only", func(m map[string]any) {
			m["start_time"] = []any{2026, 11, 21, 8, 30, 15.25}
		}, ""},
		{"missing state", func(m map[string]any) { delete(m, "state") }, "state"},
		{"activity name is a number", func(m map[string]any) { m["activity_name"] = 3 }, "activity_name"},
		{"unknown state", func(m map[string]any) { m["state"] = "SLEEPING" }, "state"},
		{"attempt is a string", func(m map[string]any) { m["attempt"] = "one" }, "attempt"},
		{"attempt is fractional", func(m map[string]any) { m["attempt"] = 1.5 }, "attempt"},
		{"heartbeat epoch is a string", func(m map[string]any) { m["heartbeat_time_epoch"] = "yesterday" }, "heartbeat_time_epoch"},
		{"start time list too short", func(m map[string]any) { m["start_time"] = []any{2026, 11} }, "start_time"},
		{"start time month 13", func(m map[string]any) { m["start_time"] = []any{2026, 13, 1, 0, 0, 0} }, "start_time"},
		{"start time element is a string", func(m map[string]any) { m["start_time"] = []any{2026, "11", 1, 0, 0, 0} }, "start_time"},
		{"pending dependencies not a set", func(m map[string]any) { m["pending_dependencies"] = "a" }, "pending_dependencies"},
		{"heartbeat enabled is a string", func(m map[string]any) { m["heartbeat_enabled"] = "yes" }, "heartbeat_enabled"},
		{"huge heartbeat timeout", func(m map[string]any) { m["heartbeat_timeout"] = 1e12 }, "heartbeat_timeout"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base(fmt.Sprintf("act-%d", i))
			tc.edit(m)
			h.PutForeignActivity(t, st, m)
			k := state.ActivityKey{ActivityExecID: m["activity_exec_id"].(string), WorkflowExecID: wf}
			a, err := st.GetActivity(testbin.Context(t), k)
			if tc.wantAttr == "" {
				if err != nil {
					t.Fatalf("GetActivity: %v", err)
				}
				if a.ActivityName != fmt.Sprintf("act-%d", i) {
					t.Errorf("activity name %q, want it read from the ID", a.ActivityName)
				}
				if _, ok := m["start_time"]; ok && a.StartTime.IsZero() {
					t.Errorf("start time from the contract's list was not read")
				}
				return
			}
			var ie *state.DecodeError
			if !errors.As(err, &ie) || !errors.Is(err, state.ErrInvalidItem) {
				t.Fatalf("GetActivity: got %v, want a *DecodeError", err)
			}
			if ie.Attr != tc.wantAttr || !strings.Contains(err.Error(), tc.wantAttr) || !strings.Contains(err.Error(), k.ActivityExecID) {
				t.Errorf("error %q should name attribute %s and the item", err, tc.wantAttr)
			}
			// A conditional write on such an item reports it too, never panics.
			if err := st.Heartbeat(testbin.Context(t), k, "nobody", time.Now()); err == nil {
				t.Errorf("Heartbeat on a malformed item succeeded")
			}
		})
	}
	// The listing of the workflow returns the items that decode, and names
	// each one it skipped, with its attribute: one bad item never hides
	// the others, nor is it dropped silently.
	acts, err := st.Activities(testbin.Context(t), wf)
	skipped, other := state.Skipped(err)
	if other != nil || !errors.Is(err, state.ErrInvalidItem) {
		t.Fatalf("Activities over malformed items: got %v, want a *SkippedError", err)
	}
	good, bad := 0, map[string]string{}
	for i, tc := range tests {
		if tc.wantAttr == "" {
			good++
		} else {
			bad[state.ActivityExecIDFor(wf, fmt.Sprintf("act-%d", i))] = tc.wantAttr
		}
	}
	if len(acts) != good {
		t.Errorf("Activities returned %d items, want the %d that decode", len(acts), good)
	}
	if len(skipped) != len(bad) {
		t.Errorf("Activities skipped %d items, want %d", len(skipped), len(bad))
	}
	for _, de := range skipped {
		if want, ok := bad[de.ID]; !ok || de.Attr != want || de.Table == "" || !strings.Contains(de.Key, wf) {
			t.Errorf("skipped %+v: want one of the malformed items, its attribute %q, its table and its whole key", *de, want)
		}
	}
}

func testLandedWriteOnMalformedItem(t *testing.T, h Harness) {
	st := h.New(t)
	wf := state.NewWorkflowExecID("odd")
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wf, "a"), WorkflowExecID: wf}
	h.PutForeignActivity(t, st, map[string]any{
		"activity_exec_id": k.ActivityExecID, "workflow_exec_id": wf, "state": "QUEUED",
		"reason": 42, // malformed, and unrelated to a claim
	})
	a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("first")})
	if err != nil || a.State != state.Running || a.Owner != "first" {
		t.Fatalf("claim of an item with a malformed reason: %+v, %v; the write landed, so it must succeed", a, err)
	}
	_, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("second")})
	if ce := conflict(t, err); ce.Owner != "first" || ce.State != string(state.Running) {
		t.Errorf("the loser sees %+v, want RUNNING held by first", ce)
	}
	if _, err := st.GetActivity(testbin.Context(t), k); !errors.Is(err, state.ErrInvalidItem) {
		t.Errorf("a plain read still reports the malformed attribute: got %v", err)
	}
}
