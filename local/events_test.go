package local

import (
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
