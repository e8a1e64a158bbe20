package local

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

func TestProgress(t *testing.T) {
	d, err := workflow.Parse("w.yaml", []byte("name: w\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	code := 3
	acts := func(bState state.ActivityState) []*state.ActivityExec {
		return []*state.ActivityExec{
			{ActivityName: "a", State: state.Completed, StartTime: now.Add(-2 * time.Second), EndTime: now.Add(-time.Second)},
			{ActivityName: "b", State: bState, StartTime: now.Add(-time.Second), ExitCode: &code, Reason: "exit status 3"},
		}
	}
	wf := &state.WorkflowExec{State: state.WorkflowRunning}

	// On a terminal: a table redrawn in place.
	var tty bytes.Buffer
	p := newProgress(&tty, true, 40, d, "w::1", "/logs")
	p.show(wf, acts(state.Running))
	p.show(wf, acts(state.Failed))
	out := tty.String()
	for _, want := range []string{"✓ a", "▶ b", "✗ b", "\x1b[3A", "exi…", "workflow RUNNING"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if len([]rune(strings.TrimPrefix(line, "\x1b[2K"))) > 40 && !strings.HasPrefix(line, "workflow w::1") && !strings.Contains(line, "\x1b[3A") {
			t.Errorf("row wider than the terminal: %q", line)
		}
	}

	// Elsewhere: one plain line per change, no escape codes.
	var plain bytes.Buffer
	p = newProgress(&plain, false, 0, d, "w::1", "/logs")
	p.show(wf, acts(state.Running))
	p.show(wf, acts(state.Running))
	p.show(wf, acts(state.Failed))
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) != 4 || strings.Contains(plain.String(), "\x1b") || !strings.Contains(lines[3], "b") || !strings.Contains(lines[3], "FAILED") {
		t.Errorf("plain output, want a header and 3 changes:\n%s", plain.String())
	}
}
