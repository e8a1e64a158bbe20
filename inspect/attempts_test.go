package inspect_test

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
)

// TestTextAttempts: a retried activity shows "n of max", when its next
// attempt may start, and how each earlier attempt ended.
func TestTextAttempts(t *testing.T) {
	next := time.Date(2026, 11, 23, 15, 4, 5, 0, time.UTC)
	ended := next.Add(-10 * time.Second)
	one, two := 1, 75
	s := &inspect.Status{
		Workflow: inspect.Workflow{ID: "w::1", Name: "w", State: "RUNNING"},
		Activities: []inspect.Activity{
			{Name: "fetch", State: "READY", Attempt: 3, Retries: inspect.Retries{MaxAttempts: 4, NextAttemptAt: &next,
				Earlier: []inspect.Attempt{
					{Attempt: 1, State: "FAILED", ExitCode: &one, Ended: &ended, Host: "vm", PID: 9, StderrTail: "line 1\nconnection reset\x1b[2J"},
					{Attempt: 2, State: "TIMED_OUT", Reason: "no heartbeat for 1m", ExitCode: &two},
				}}},
			{Name: "plain", State: "COMPLETED", Attempt: 1},
		},
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"3 of 4",
		"next attempt at 2026-11-23 15:04:05.000 UTC",
		"attempt 1: FAILED (exit 1) at 2026-11-23 15:03:55 on vm pid 9: connection reset?[2J",
		"attempt 2: TIMED_OUT (exit 75): no heartbeat for 1m",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape from stderr reached the terminal:\n%q", out)
	}
	if strings.Contains(out, "1 of") {
		t.Errorf("an activity without a policy shows a maximum:\n%s", out)
	}
}

// TestTextRowsAreSanitised: the row of an activity's latest attempt, like
// its earlier attempts' lines, prints no control character its command's
// stderr, its reason or a Simple Lambda API client's event held.
func TestTextRowsAreSanitised(t *testing.T) {
	s := &inspect.Status{
		Workflow: inspect.Workflow{ID: "w::1", Name: "w", State: "FAILED"},
		Activities: []inspect.Activity{{Name: "a", State: "FAILED", Reason: "exit 1\x1b]0;owned\x07",
			StderrTail: "boom\x1b[2J\n\tat Main.java:3\n", Rejected: []inspect.RejectedEvent{{ID: "a::\x1b[31mred", Transition: "RUNNING\x1b[0m", Reason: "late\x1b[H"}}}},
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("a control character reached the terminal:\n%q", out)
	}
	if !strings.Contains(out, "stderr: \tat Main.java:3") {
		t.Errorf("a stack trace's tab was not kept:\n%q", out)
	}
}
