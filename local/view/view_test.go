package view

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/local"
)

// events is a run of a ← b in which b fails, as local.Run reports it.
func events(t *testing.T) (*definition.Workflow, []local.Event) {
	t.Helper()
	d, err := definition.Parse("w.yaml", []byte("name: w\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	code := 3
	act := func(name, st string, at time.Time, start, end time.Time) local.Event {
		return local.Event{Time: at, Kind: local.EventActivity, WorkflowExecID: "w::1", Activity: name, ActivityExecID: name + "::1",
			State: st, StartTime: start, EndTime: end, LogFile: "/logs/" + name + "::1.log"}
	}
	failed := act("b", "FAILED", t0.Add(3*time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second))
	failed.ExitCode, failed.Reason, failed.StderrTail = &code, "exit status 3", "bad\x1b[2J input\n"
	return d, []local.Event{
		{Time: t0, Kind: local.EventStarted, WorkflowExecID: "w::1", LogDir: "/logs"},
		act("a", "READY", t0, time.Time{}, time.Time{}),
		act("b", "REQUESTED", t0, time.Time{}, time.Time{}),
		{Time: t0, Kind: local.EventWorkflow, WorkflowExecID: "w::1", State: "RUNNING", StartTime: t0},
		act("a", "RUNNING", t0.Add(time.Second), t0.Add(time.Second), time.Time{}),
		{Time: t0.Add(1500 * time.Millisecond), Kind: local.EventTick, WorkflowExecID: "w::1"},
		act("a", "COMPLETED", t0.Add(2*time.Second), t0.Add(time.Second), t0.Add(2*time.Second)),
		act("b", "RUNNING", t0.Add(2*time.Second), t0.Add(2*time.Second), time.Time{}),
		failed,
		{Time: t0.Add(3 * time.Second), Kind: local.EventWorkflow, WorkflowExecID: "w::1", State: "FAILED", Reason: "b FAILED", StartTime: t0, EndTime: t0.Add(3 * time.Second)},
		{Time: t0.Add(3 * time.Second), Kind: local.EventEnded, WorkflowExecID: "w::1", State: "FAILED", Reason: "b FAILED", StartTime: t0, EndTime: t0.Add(3*time.Second + 4*time.Millisecond)},
	}
}

func play(t *testing.T, o Options) string {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	d, evs := events(t)
	show := New(d, o)
	for _, e := range evs {
		show(e)
	}
	return out.String()
}

// TestPlainLines: off a terminal, one line per change of state, RUNNING
// included, the tree's indentation, no escape codes, and the duration
// status shows.
func TestPlainLines(t *testing.T) {
	out := play(t, Options{})
	if strings.Contains(out, "\x1b") {
		t.Errorf("plain output holds escape codes:\n%q", out)
	}
	for _, want := range []string{" a   RUNNING", "   b RUNNING", " a   COMPLETED  in 1s", "workflow RUNNING", "workflow FAILED",
		"workflow w::1 FAILED in 3s", `bad\x1b[2J input`, "full log: /logs/b::1.log", "exit code 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "RUNNING"); n != 3 {
		t.Errorf("want 3 RUNNING lines (a, b, the workflow), got %d:\n%s", n, out)
	}
}

// TestTerminalTree: on a terminal, the tree redrawn in place, cut to the
// width, coloured only when asked.
func TestTerminalTree(t *testing.T) {
	out := play(t, Options{TTY: true, Width: 30})
	for _, want := range []string{"✓ a", "▶   b", "✗   b", "\x1b[3A", "workflow FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		row := strings.TrimPrefix(line, "\x1b[2K")
		if strings.HasPrefix(row, "  ") && len([]rune(row)) > 30 {
			t.Errorf("row wider than the terminal: %q", line)
		}
	}
	if strings.Contains(out, "\x1b[0m") {
		t.Errorf("colours without Colors.On:\n%q", out)
	}
	coloured := play(t, Options{TTY: true, Width: 80, Colors: inspect.Colors{On: true}})
	for _, want := range []string{"\x1b[32mCOMPLETED\x1b[0m", "\x1b[31mFAILED\x1b[0m", "\x1b[33mRUNNING\x1b[0m"} {
		if !strings.Contains(coloured, want) {
			t.Errorf("coloured output lacks %q:\n%q", want, coloured)
		}
	}
}

// TestJSONEvents: one exact JSON object per event, ticks left out.
func TestJSONEvents(t *testing.T) {
	out := play(t, Options{JSON: true, TTY: true, Colors: inspect.Colors{On: true}})
	_, evs := events(t)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(evs)-1 {
		t.Fatalf("got %d lines for %d events (one a tick):\n%s", len(lines), len(evs), out)
	}
	var b local.Event
	for _, l := range lines {
		var e local.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, l)
		}
		if e.Kind == local.EventTick {
			t.Error("a tick in the JSON")
		}
		if e.Kind == local.EventActivity && e.State == "FAILED" {
			b = e
		}
	}
	if b.StderrTail != "bad\x1b[2J input\n" || b.ExitCode == nil || *b.ExitCode != 3 {
		t.Errorf("the JSON does not keep the exact values: %+v", b)
	}
}

// retried is a run of a ← b in which a, under a retry policy of 2
// attempts, fails, waits out its delay, and fails again; b, without a
// policy, is cancelled.
func retried(t *testing.T) (*definition.Workflow, []local.Event) {
	t.Helper()
	d, err := definition.Parse("w.yaml", []byte("name: w\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2, interval: 3s}}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	code := 1
	act := func(name, id string, attempt int, st string, at time.Time, start, end time.Time) local.Event {
		e := local.Event{Time: at, Kind: local.EventActivity, WorkflowExecID: "w::1", Activity: name, ActivityExecID: id, Attempt: attempt,
			State: st, StartTime: start, EndTime: end, LogFile: "/logs/" + id + ".log"}
		if st == "FAILED" {
			e.ExitCode, e.Reason = &code, "exit status 1"
		}
		return e
	}
	waiting := act("a", "a::2", 2, "READY", t0.Add(2*time.Second), time.Time{}, time.Time{})
	waiting.NotBefore = t0.Add(5 * time.Second)
	return d, []local.Event{
		{Time: t0, Kind: local.EventStarted, WorkflowExecID: "w::1", LogDir: "/logs"},
		act("a", "a::1", 1, "RUNNING", t0, t0, time.Time{}),
		act("b", "b::1", 1, "REQUESTED", t0, time.Time{}, time.Time{}),
		{Time: t0, Kind: local.EventWorkflow, WorkflowExecID: "w::1", State: "RUNNING", StartTime: t0},
		act("a", "a::1", 1, "FAILED", t0.Add(2*time.Second), t0, t0.Add(2*time.Second)),
		waiting,
		{Time: t0.Add(3 * time.Second), Kind: local.EventTick, WorkflowExecID: "w::1"},
		act("a", "a::2", 2, "RUNNING", t0.Add(5*time.Second), t0.Add(5*time.Second), time.Time{}),
		act("a", "a::2", 2, "FAILED", t0.Add(6*time.Second), t0.Add(5*time.Second), t0.Add(6*time.Second)),
		act("b", "b::1", 1, "CANCELLED", t0.Add(6*time.Second), time.Time{}, t0.Add(6*time.Second)),
		{Time: t0.Add(6 * time.Second), Kind: local.EventWorkflow, WorkflowExecID: "w::1", State: "FAILED", Reason: "a FAILED", StartTime: t0, EndTime: t0.Add(6 * time.Second)},
		{Time: t0.Add(6 * time.Second), Kind: local.EventEnded, WorkflowExecID: "w::1", State: "FAILED", Reason: "a FAILED", StartTime: t0, EndTime: t0.Add(6 * time.Second)},
	}
}

func playRetried(t *testing.T, o Options) (string, []local.Event) {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	d, evs := retried(t)
	show := New(d, o)
	for _, e := range evs {
		show(e)
	}
	return out.String(), evs
}

// TestPlainLinesAttempts: off a terminal, each attempt's changes with
// "attempt n of max" (a first attempt once it failed), when the waiting retry starts, and each earlier
// attempt's end; nothing about attempts for an activity without a policy.
func TestPlainLinesAttempts(t *testing.T) {
	out, evs := playRetried(t, Options{})
	starts := evs[5].NotBefore.Local().Format("15:04:05")
	for _, want := range []string{
		"a   RUNNING\n", // a first attempt says nothing of attempts until it fails
		"a   FAILED  exit status 1  (attempt 1 of 2)\n",
		"a   READY  (attempt 2 of 2, starts at " + starts + ")\n",
		"a   FAILED  exit status 1  (attempt 2 of 2)\n",
		"activity a FAILED (exit code 1, attempt 2 of 2): exit status 1",
		"full log: /logs/a::2.log",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plain output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("plain output holds escape codes:\n%q", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, " b ") && strings.Contains(l, "attempt") {
			t.Errorf("an activity without a retry policy shows attempts: %q", l)
		}
	}
}

// TestTerminalTreeAttempts: on a terminal, one row per activity (its
// latest attempt), the waiting retry's start time while it waits, and the
// earlier attempt's end written above the tree when its retry shows.
func TestTerminalTreeAttempts(t *testing.T) {
	out, evs := playRetried(t, Options{TTY: true, Width: 120})
	starts := evs[5].NotBefore.Local().Format("15:04:05")
	for _, want := range []string{
		"\x1b[3A\x1b[J", // the tree (a, b, the workflow) cleared for the line above it
		"a   FAILED  exit status 1  (attempt 1 of 2)\n",
		"(attempt 2 of 2, starts at " + starts + ")",
		"\x1b[3A",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal output lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "\x1b[4A") {
		t.Errorf("the tree has a row per attempt, want one per activity:\n%q", out)
	}
	// The earlier attempt's end is written once, above the tree.
	if n := strings.Count(out, "FAILED  exit status 1  (attempt 1 of 2)\n"); n != 1 {
		t.Errorf("attempt 1's end written %d times, want once:\n%q", n, out)
	}
	// The last tree shows the final attempt, no longer waiting.
	last := out[strings.LastIndex(out, "\x1b[3A"):]
	if strings.Contains(last, "starts at") || !strings.Contains(last, "(attempt 2 of 2)") {
		t.Errorf("the last tree: %q", last)
	}
}

// TestJSONEventsAttempts: the JSON carries each event's attempt and a
// waiting retry's not_before.
func TestJSONEventsAttempts(t *testing.T) {
	out, evs := playRetried(t, Options{JSON: true})
	var waiting map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not one JSON object a line: %v\n%s", err, l)
		}
		if e["activity_exec_id"] == "a::2" && e["state"] == "READY" {
			waiting = e
		}
	}
	if waiting == nil {
		t.Fatalf("no event for the waiting retry:\n%s", out)
	}
	if waiting["attempt"] != float64(2) || waiting["not_before"] != evs[5].NotBefore.Format(time.RFC3339Nano) {
		t.Errorf("the waiting retry's event: %v", waiting)
	}
}

// TestKubernetesJobShown: an activity launched as a Kubernetes Job shows
// the Job's namespace/name while it runs, on a terminal and off one.
func TestKubernetesJobShown(t *testing.T) {
	d, err := definition.Parse("w.yaml", []byte("name: w\nactivities:\n  a: {launch: {type: kubernetes, image: i}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, tty := range []bool{false, true} {
		var out bytes.Buffer
		show := New(d, Options{Out: &out, TTY: tty, Width: 80})
		show(local.Event{Time: t0, Kind: local.EventActivity, WorkflowExecID: "w::1", Activity: "a", ActivityExecID: "a::1",
			State: "RUNNING", StartTime: t0, LaunchedAs: "kubernetes:batch/wb-a-0a1b2c3d4e5f"})
		show(local.Event{Time: t0, Kind: local.EventActivity, WorkflowExecID: "w::1", Activity: "a", ActivityExecID: "a::1",
			State: "QUEUED", LaunchedAs: "kubernetes:batch/\x1b[2Jevil"})
		if got := out.String(); !strings.Contains(got, "job batch/wb-a-0a1b2c3d4e5f") || strings.Contains(got, "\x1b[2Jevil") {
			t.Errorf("tty %v: %q", tty, got)
		}
	}
}
