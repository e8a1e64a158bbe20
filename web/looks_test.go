package web

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// TestEveryStateHasALook walks the state package's lists: every activity
// and workflow state has an icon and a class the stylesheet colours, so a
// state added there without them here fails.
func TestEveryStateHasALook(t *testing.T) {
	css, err := assets.ReadFile("assets/static/style.css")
	if err != nil {
		t.Fatal(err)
	}
	check := func(kind, s string, l look) {
		t.Helper()
		if l == unknownLook || l.Icon == "" || l.Class == "" {
			t.Errorf("%s state %s has no look: %+v", kind, s, l)
			return
		}
		badge := regexp.MustCompile(`\.badge\.s-` + regexp.QuoteMeta(l.Class) + ` \{[^}]*color:`)
		if !badge.Match(css) {
			t.Errorf("%s state %s: the stylesheet gives class s-%s no colour", kind, s, l.Class)
		}
	}
	for _, s := range state.ActivityStates {
		check("activity", s.String(), activityLook(s))
	}
	for _, s := range state.WorkflowStates {
		check("workflow", s.String(), workflowLook(s))
		// A workflow state looks as the activity state of the same name.
		if got, want := workflowLook(s), activityLook(state.ActivityState(s)); got != want {
			t.Errorf("workflow state %s looks %+v, activity state %s %+v", s, got, s, want)
		}
	}
	if got := activityLook("<script>"); got != unknownLook {
		t.Errorf("a state that is not the contract's looks %+v, want %+v", got, unknownLook)
	}
}

// TestActionsFollowTheWorkflowState walks every workflow state: one that
// can still move offers Cancel, a settled one Rerun, and Rerun from
// failure unless it completed.
func TestActionsFollowTheWorkflowState(t *testing.T) {
	for _, s := range state.WorkflowStates {
		v := &workflowView{ID: "w::1", Actions: true, CSRF: "token", Workflow: workflowLook(s),
			Status: &inspect.Status{Workflow: inspect.Workflow{ID: "w::1", Name: "w", State: s}}}
		var b bytes.Buffer
		if err := pages.ExecuteTemplate(&b, "workflow-live", v); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		page := b.String()
		cancel, rerun, fromFailure := strings.Contains(page, ">Cancel</button>"), strings.Contains(page, ">Rerun</button>"),
			strings.Contains(page, ">Rerun from failure</button>")
		if cancel != !s.Terminal() || rerun != s.Terminal() || fromFailure != (s.Terminal() && s != state.WorkflowCompleted) {
			t.Errorf("%s offers cancel %v, rerun %v, rerun from failure %v", s, cancel, rerun, fromFailure)
		}
	}
}
