package inspect

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// hostile holds what a broken or hostile client could write into items.
const hostile = "evil\x1b[2J\x1b]0;pwned\a\u202e"

// TestTextIsInert: ids, names, reasons and stderr tails from the store
// reach the terminal with their control characters escaped, while JSON
// keeps the exact values.
func TestTextIsInert(t *testing.T) {
	now := time.Now()
	code := 1
	s := &Status{
		Workflow: Workflow{ID: "w::" + hostile, Name: hostile, State: "FAILED", Reason: "why " + hostile,
			RequestID: hostile, Source: hostile, Started: &now},
		Activities: []Activity{{ID: hostile, Name: hostile, State: "FAILED", Reason: hostile, ExitCode: &code,
			Signal: hostile, Host: hostile, PID: 7, StderrTail: "line 1\n" + hostile + "\nline 3\r\n",
			Rejected: []RejectedEvent{{ID: hostile, Transition: hostile, Reason: hostile}}}},
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := WriteList(&text, []Workflow{s.Workflow}); err != nil {
		t.Fatal(err)
	}
	if err := WriteStats(&text, []Stats{{Name: hostile, ByState: map[state.WorkflowState]int{}}}); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	if strings.ContainsAny(out, "\x1b\a\r\u202e") {
		t.Errorf("text output holds raw control characters:\n%q", out)
	}
	if want := `evil\x1b[2J\x1b]0;pwned\a\u202e`; strings.Count(out, want) < 10 {
		t.Errorf("text output does not show the escaped value %s at each place:\n%s", want, out)
	}
	if !strings.Contains(out, "stderr: line 1\n") || !strings.Contains(out, "stderr: line 3\\r\n") {
		t.Errorf("stderr tail lost its lines:\n%s", out)
	}

	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(s); err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Workflow.ID != "w::"+hostile || back.Activities[0].StderrTail != s.Activities[0].StderrTail || back.Activities[0].Name != hostile {
		t.Errorf("JSON does not keep the exact values: %+v", back)
	}
	if bytes.ContainsAny(js.Bytes(), "\x1b\a") {
		t.Errorf("JSON holds raw control characters: %q", js.String())
	}
}
