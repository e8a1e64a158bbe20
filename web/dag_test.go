package web

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

func rowsOf(deps map[string][]string, order ...string) []*activityRow {
	var rows []*activityRow
	for _, n := range order {
		rows = append(rows, &activityRow{Activity: &inspect.Activity{Name: n, State: "REQUESTED", DependsOn: deps[n]}, look: activityLook(state.Requested)})
	}
	return rows
}

func TestLayoutPutsEveryActivityRightOfWhatItWaitsOn(t *testing.T) {
	deps := map[string][]string{
		"b": {"a"}, "c": {"a"}, "d": {"b", "c"}, "e": {"d", "a"}, "f": {"ghost"},
	}
	d := layout(rowsOf(deps, "a", "b", "c", "d", "e", "f"))
	x := map[string]int{}
	y := map[string]int{}
	for _, n := range d.Nodes {
		x[n.Row.Name], y[n.Row.Name] = n.X, n.Y
		if n.X < 0 || n.Y < 0 || n.X+nodeW > d.W || n.Y+nodeH > d.H {
			t.Errorf("node %s at (%d,%d) is outside the %dx%d drawing", n.Row.Name, n.X, n.Y, d.W, d.H)
		}
	}
	for n, ups := range deps {
		for _, up := range ups {
			if _, ok := x[up]; ok && x[up] >= x[n] {
				t.Errorf("%s (x=%d) is not left of %s (x=%d)", up, x[up], n, x[n])
			}
		}
	}
	if x["b"] != x["c"] || y["b"] == y["c"] {
		t.Errorf("b and c share a column, one above the other: (%d,%d) (%d,%d)", x["b"], y["b"], x["c"], y["c"])
	}
	if x["f"] != x["a"] {
		t.Errorf("f waits on an activity that does not exist: it belongs in the first column")
	}
	if len(d.Edges) != 6 {
		t.Errorf("%d edges, want 6 (the one to a missing activity is not drawn)", len(d.Edges))
	}
	for _, e := range d.Edges {
		if !strings.HasPrefix(e.Path, "M") || strings.ContainsAny(e.Path, "<>\"") {
			t.Errorf("edge path %q", e.Path)
		}
	}
}

func TestLayoutSurvivesACycleAndLongNames(t *testing.T) {
	long := strings.Repeat("x", 60)
	deps := map[string][]string{"a": {"b"}, "b": {"a"}, long: {"a"}, "self": {"self"}}
	d := layout(rowsOf(deps, "a", "b", long, "self"))
	if len(d.Nodes) != 4 {
		t.Fatalf("%d nodes, want 4", len(d.Nodes))
	}
	for _, n := range d.Nodes {
		if n.Row.Name == long && len([]rune(n.Label)) != maxName {
			t.Errorf("a long name is shown as %q, want it cut to %d characters", n.Label, maxName)
		}
	}
	if empty := layout(nil); len(empty.Nodes) != 0 || empty.W <= 0 {
		t.Errorf("an empty layout: %+v", empty)
	}
}

// TestWhereSaysALocalPidOnce: a local launch is named by the pid the
// wrapper reports too (or, supervised inline, the launcher's: inline, with
// no pid again); another launch (a task ARN) is added to it.
func TestWhereSaysALocalPidOnce(t *testing.T) {
	for _, tc := range []struct {
		launched, want string
	}{
		{"pid:42", "vm pid 42"},
		{"pid:41", "vm pid 42 (pid:41)"},
		{"inline:42", "vm pid 42 (inline)"},
		{"inline:41", "vm pid 42 (inline:41)"},
		{"arn:aws:ecs:eu-west-1:1:task/c/t", "vm pid 42 (arn:aws:ecs:eu-west-1:1:task/c/t)"},
		{"kubernetes:batch/wb-a-0a1b2c3d4e5f", "vm pid 42 (kubernetes:batch/wb-a-0a1b2c3d4e5f)"},
		{"", "vm pid 42"},
	} {
		r := newActivityRow(&inspect.Activity{State: "RUNNING", Host: "vm", PID: 42, LaunchedAs: tc.launched}, time.Now())
		if r.Where != tc.want {
			t.Errorf("launched as %q: where %q, want %q", tc.launched, r.Where, tc.want)
		}
	}
}
