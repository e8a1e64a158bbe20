package state_test

import (
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

func TestIDForms(t *testing.T) {
	wf := state.NewWorkflowExecID("nightly-etl")
	name, u, err := state.SplitID(wf)
	if err != nil || name != "nightly-etl" || len(u) != 36 {
		t.Fatalf("SplitID(%s) = %q, %q, %v", wf, name, u, err)
	}
	if wf == state.NewWorkflowExecID("nightly-etl") {
		t.Error("two new execution IDs are equal")
	}

	act := state.ActivityExecIDFor(wf, "extract")
	if !strings.HasPrefix(act, "extract::") {
		t.Errorf("activity ID %s is not (activity_name)::(uuid)", act)
	}
	if act != state.ActivityExecIDFor(wf, "extract") {
		t.Error("activity IDs must be derivable, so a retried start writes the same items")
	}
	if act == state.ActivityExecIDFor(state.NewWorkflowExecID("nightly-etl"), "extract") {
		t.Error("the same activity in two executions got one ID")
	}

	r1 := state.WorkflowExecIDForRequest("nightly-etl", "2026-11-21")
	if r1 != state.WorkflowExecIDForRequest("nightly-etl", "2026-11-21") || r1 == state.WorkflowExecIDForRequest("nightly-etl", "2026-11-22") {
		t.Error("WorkflowExecIDForRequest must be a function of the request")
	}
	if got := state.DependencyID(act, 2); got != act+":2" {
		t.Errorf("DependencyID = %s, want %s:2", got, act)
	}
}

func TestSplitIDRejects(t *testing.T) {
	for _, id := range []string{"", "nightly", "nightly::", "::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "nightly::not-a-uuid", "bad name::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"} {
		if _, _, err := state.SplitID(id); err == nil {
			t.Errorf("SplitID(%q) succeeded", id)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"a", "nightly-etl", "step_1.v2", strings.Repeat("x", state.MaxNameLength)} {
		if err := state.CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-lead", "has space", "a:b", "ünïcode", strings.Repeat("x", state.MaxNameLength+1)} {
		if err := state.CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) succeeded", bad)
		}
	}
}
