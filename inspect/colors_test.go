package inspect

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

func TestColorsFor(t *testing.T) {
	for _, tc := range []struct {
		name string
		tty  bool
		env  map[string]string
		want bool
	}{
		{"a terminal", true, nil, true},
		{"not a terminal", false, nil, false},
		{"NO_COLOR set", true, map[string]string{"NO_COLOR": "1"}, false},
		{"NO_COLOR empty counts as unset", true, map[string]string{"NO_COLOR": ""}, true},
		{"a dumb terminal", true, map[string]string{"TERM": "dumb"}, false},
	} {
		got := colorsFor(tc.tty, func(k string) string { return tc.env[k] })
		if got.On != tc.want {
			t.Errorf("%s: colours %v, want %v", tc.name, got.On, tc.want)
		}
	}
	if s := (Colors{}).Activity(state.Failed); s != "FAILED" {
		t.Errorf("no colours painted %q", s)
	}
}

// TestStatusColorsKeepColumns: painted states do not shift the columns.
func TestStatusColorsKeepColumns(t *testing.T) {
	now := time.Now()
	s := &Status{Workflow: Workflow{ID: "w::1", State: "RUNNING", Started: &now},
		Activities: []Activity{{Name: "a", State: "COMPLETED"}, {Name: "b", State: "RUNNING", Depth: 1, DependsOn: []string{"a"}}}}
	var plain, painted bytes.Buffer
	if err := s.WriteText(&plain); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTextColors(&painted, Colors{On: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(painted.String(), "\x1b[32mCOMPLETED\x1b[0m") || strings.Contains(plain.String(), "\x1b") {
		t.Errorf("colours: painted %q, plain %q", painted.String(), plain.String())
	}
	unpainted := strings.NewReplacer("\x1b[32m", "", "\x1b[33m", "", "\x1b[0m", "").Replace(painted.String())
	if unpainted != plain.String() {
		t.Errorf("painting moved the text:\n%s\nwant:\n%s", unpainted, plain.String())
	}
	if !strings.Contains(plain.String(), "\n  b ") {
		t.Errorf("b is not indented under a:\n%s", plain.String())
	}
}

// TestEveryStateHasAColour walks the state package's lists: a state added
// there without a colour here fails.
func TestEveryStateHasAColour(t *testing.T) {
	on := Colors{On: true}
	for _, s := range state.ActivityStates {
		if activityColors[s] == "" {
			t.Errorf("activity state %s has no colour", s)
		}
		if got, want := on.Activity(s), "\x1b["+activityColors[s]+"m"+string(s)+"\x1b[0m"; got != want {
			t.Errorf("activity state %s painted %q, want %q", s, got, want)
		}
	}
	for _, s := range state.WorkflowStates {
		if workflowColors[s] == "" {
			t.Errorf("workflow state %s has no colour", s)
		}
		if got, want := on.Workflow(s), "\x1b["+workflowColors[s]+"m"+string(s)+"\x1b[0m"; got != want {
			t.Errorf("workflow state %s painted %q, want %q", s, got, want)
		}
	}
	// A workflow state is painted as the activity state of the same name.
	for _, s := range state.WorkflowStates {
		if got, want := workflowColors[s], activityColors[state.ActivityState(s)]; got != want {
			t.Errorf("workflow state %s is %q, activity state %s is %q", s, got, s, want)
		}
	}
	// What is not a state (a raw item's) is shown inert and unpainted.
	if got, want := on.Activity("\x1b[31mEVIL"), "\\x1b[31mEVIL"; got != want {
		t.Errorf("a hostile state shows as %q, want %q", got, want)
	}
}
