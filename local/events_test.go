package local

import (
	"fmt"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// TestWatcherReportsEveryChange: one event per change of state, RUNNING
// included when polls only saw the activity before and after it ran.
func TestWatcherReportsEveryChange(t *testing.T) {
	var got []Event
	w := &watcher{emit: func(e Event) { got = append(got, e) }, id: "w::1", logDir: "/logs", last: map[string]state.ActivityState{}}
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	wf := &state.WorkflowExec{State: state.WorkflowRunning, StartTime: start}
	a := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: "a::1"}, ActivityName: "a", State: state.Queued}

	w.observe(wf, []*state.ActivityExec{a})
	w.observe(wf, []*state.ActivityExec{a}) // nothing new: a tick
	done := *a
	done.State, done.StartTime, done.EndTime = state.Completed, start.Add(time.Second), start.Add(3*time.Second)
	w.observe(wf, []*state.ActivityExec{&done})
	ended := *wf
	ended.State, ended.EndTime = state.WorkflowCompleted, start.Add(4*time.Second)
	w.observe(&ended, []*state.ActivityExec{&done})

	want := []struct {
		kind  EventKind
		state string
		at    time.Time
	}{
		{EventActivity, "QUEUED", time.Time{}},
		{EventWorkflow, "RUNNING", time.Time{}},
		{EventTick, "", time.Time{}},
		{EventActivity, "RUNNING", done.StartTime},
		{EventActivity, "COMPLETED", done.EndTime},
		{EventWorkflow, "COMPLETED", ended.EndTime},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].State != w.state || (!w.at.IsZero() && !got[i].Time.Equal(w.at)) {
			t.Errorf("event %d: got %s %s at %s, want %s %s at %s", i, got[i].Kind, got[i].State, got[i].Time, w.kind, w.state, w.at)
		}
	}
	if got[4].LogFile != "/logs/a::1.log" {
		t.Errorf("log file: %q", got[4].LogFile)
	}
}

// TestLimiter lets a repeated warning through once per period and counts
// the ones it held back.
func TestLimiter(t *testing.T) {
	l := &limiter{every: 10 * time.Second}
	t0 := time.Now()
	for i, tc := range []struct {
		after time.Duration
		ok    bool
		held  int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{5 * time.Second, false, 0},
		{11 * time.Second, true, 2},
		{12 * time.Second, false, 0},
	} {
		held, ok := l.allow(t0.Add(tc.after))
		if ok != tc.ok || held != tc.held {
			t.Errorf("call %d at +%s: got (%d, %v), want (%d, %v)", i, tc.after, held, ok, tc.held, tc.ok)
		}
	}
}

// TestWatcherFollowsAttempts: each attempt of an activity is its own item;
// the watcher reports each one's changes, with its attempt and not_before,
// and an earlier attempt's end before its retry even when the store lists
// the retry first.
func TestWatcherFollowsAttempts(t *testing.T) {
	var got []Event
	w := &watcher{emit: func(e Event) { got = append(got, e) }, id: "w::1", logDir: "/logs", last: map[string]state.ActivityState{}}
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	wf := &state.WorkflowExec{State: state.WorkflowRunning, StartTime: start}
	code := 1
	first := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: "a::1"}, ActivityName: "a", State: state.Running, StartTime: start}
	w.observe(wf, []*state.ActivityExec{first})
	failed := *first
	failed.State, failed.Attempt, failed.EndTime, failed.ExitCode, failed.Reason = state.Failed, 1, start.Add(time.Second), &code, "exit status 1"
	failed.RetriedBy = "a::1-r2"
	retry := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: "a::1-r2"}, ActivityName: "a", State: state.Ready,
		Attempt: 2, RetryOf: "a::1", NotBefore: start.Add(3 * time.Second)}
	got = nil
	w.observe(wf, []*state.ActivityExec{retry, &failed})
	if len(got) != 2 {
		t.Fatalf("got %d events, want the end of attempt 1 and the waiting attempt 2: %+v", len(got), got)
	}
	if e := got[0]; e.ActivityExecID != "a::1" || e.State != "FAILED" || e.Attempt != 1 || e.ExitCode == nil || *e.ExitCode != 1 {
		t.Errorf("first event: %+v, want attempt 1 FAILED with exit 1", e)
	}
	if e := got[1]; e.ActivityExecID != "a::1-r2" || e.State != "READY" || e.Attempt != 2 || !e.NotBefore.Equal(retry.NotBefore) {
		t.Errorf("second event: %+v, want attempt 2 READY not before %s", e, retry.NotBefore)
	}
	got = nil
	w.observe(wf, []*state.ActivityExec{retry, &failed})
	if len(got) != 1 || got[0].Kind != EventTick {
		t.Errorf("nothing changed, got %+v", got)
	}
	if e := w.activity(first, state.Running, start); e.Attempt != 1 {
		t.Errorf("a first attempt never claimed is attempt 1, got %d", e.Attempt)
	}
}

// TestWatcherOrdersByTime: what one poll finds is told in the order it
// happened, whatever the store's order: an activity that ended before its
// dependent started comes first.
func TestWatcherOrdersByTime(t *testing.T) {
	var got []Event
	w := &watcher{emit: func(e Event) { got = append(got, e) }, id: "w::1", logDir: "/logs", last: map[string]state.ActivityState{}}
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	wf := &state.WorkflowExec{State: state.WorkflowRunning, StartTime: t0}
	up := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: "up::3"}, ActivityName: "up", State: state.Ready, Attempt: 3}
	down := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: "down::1"}, ActivityName: "down", State: state.Requested}
	w.observe(wf, []*state.ActivityExec{down, up})
	up2, down2 := *up, *down
	up2.State, up2.StartTime, up2.EndTime = state.Completed, t0.Add(time.Second), t0.Add(2*time.Second)
	down2.State, down2.StartTime, down2.EndTime = state.Completed, t0.Add(3*time.Second), t0.Add(4*time.Second)
	got = nil
	w.observe(wf, []*state.ActivityExec{&down2, &up2})
	var order []string
	for _, e := range got {
		order = append(order, e.Activity+" "+e.State)
	}
	if want := "[up RUNNING up COMPLETED down RUNNING down COMPLETED]"; fmt.Sprint(order) != want {
		t.Errorf("got %v, want %s", order, want)
	}
}
