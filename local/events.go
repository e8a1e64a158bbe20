package local

import (
	"cmp"
	"path/filepath"
	"slices"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// EventKind names what an Event reports.
type EventKind string

// The kinds of Event, in the order a run emits them.
const (
	EventStarted  EventKind = "started"  // the execution exists; LogDir holds the activities' output
	EventActivity EventKind = "activity" // an activity moved to State
	EventMap      EventKind = "map"      // a for_each map's elements moved on (Map, Message)
	EventWorkflow EventKind = "workflow" // the workflow moved to State
	EventTick     EventKind = "tick"     // nothing changed; a live view may redraw its clocks
	EventNote     EventKind = "note"     // something for the person at the terminal (Message)
	EventEnded    EventKind = "ended"    // the run is over; the workflow is in State
)

// Event is one thing that happened in a run, for a view to show. Times
// and durations are the store's, so that a view says what `whimbrel
// status` says. State is the contract name of the activity's state
// (EventActivity) or the workflow's (EventWorkflow, EventEnded), one JSON
// attribute for both; a view reads it typed, with ActivityState or
// WorkflowState.
type Event struct {
	Time           time.Time `json:"time"`
	Kind           EventKind `json:"event"`
	WorkflowExecID string    `json:"workflow_exec_id"`
	Activity       string    `json:"activity_name,omitempty"`
	ActivityExecID string    `json:"activity_exec_id,omitempty"`
	State          string    `json:"state,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	// Attempt is which run of the activity the item is (1 for the first);
	// a retry is a new item, with the same Activity and the next Attempt.
	Attempt int `json:"attempt,omitempty"`
	// NotBefore is when a retry waiting out its delay may start.
	NotBefore time.Time `json:"not_before,omitzero"`
	ExitCode  *int      `json:"exit_code,omitempty"`
	StartTime time.Time `json:"start_time,omitzero"`
	EndTime   time.Time `json:"end_time,omitzero"`
	// StderrTail is the last lines of a failed activity's stderr.
	StderrTail string `json:"stderr_tail,omitempty"`
	// LogFile is an activity's output; LogDir is where all of them go.
	LogFile string `json:"log_file,omitempty"`
	LogDir  string `json:"log_dir,omitempty"`
	Message string `json:"message,omitempty"`
	// LaunchedAs is what the launcher started, as the item records it.
	LaunchedAs string `json:"launched_as,omitempty"`
	// Shown is how the activity's state is shown when that says more
	// than the state: SKIPPED, or CANCELLED (rule) (see inspect.ActivityControl).
	Shown string `json:"shown,omitempty"`
	// Finally marks a finally activity.
	Finally bool `json:"finally,omitempty"`
	// Child is the execution ID of the child workflow an activity runs
	// (docs/sub-workflows.md): whimbrel status follows it.
	Child string `json:"child_workflow_exec_id,omitempty"`
	// Map counts a for_each map's elements, for an EventMap; Message
	// says the counts in words.
	Map *workflow.ElementCounts `json:"map,omitempty"`
}

// ActivityState is State as an activity's state, for an EventActivity.
func (e Event) ActivityState() state.ActivityState { return state.ActivityState(e.State) }

// WorkflowState is State as the workflow's state, for an EventWorkflow or
// an EventEnded.
func (e Event) WorkflowState() state.WorkflowState { return state.WorkflowState(e.State) }

// watcher turns what Run reads from the store into events: one per change
// of state it sees, of each item (each attempt of an activity is its own).
type watcher struct {
	emit   func(Event)
	id     string
	logDir string
	last   map[string]state.ActivityState // by activity_exec_id
	counts map[string]string              // each map's counts as last told, by activity name
	lastWF state.WorkflowState
	// finally names the definition's finally activities, for Event.Finally.
	finally map[string]*definition.Activity
}

func (w *watcher) activity(a *state.ActivityExec, s state.ActivityState, at time.Time) Event {
	e := Event{Time: at, Kind: EventActivity, WorkflowExecID: w.id, Activity: a.ActivityName, ActivityExecID: a.ActivityExecID,
		State: string(s), Attempt: workflow.AttemptOf(a), NotBefore: a.NotBefore, StartTime: a.StartTime,
		LogFile: filepath.Join(w.logDir, a.ActivityExecID+".log"), LaunchedAs: a.LaunchedAs}
	if a.Skipped {
		e.Shown = "SKIPPED" // each of its moves: it never ran
	}
	e.Finally = w.finally[a.ActivityName] != nil
	e.Child, _ = state.ChildOf(a)
	if s == a.State {
		e.Reason, e.ExitCode, e.EndTime = a.Reason, a.ExitCode, a.EndTime
		if workflow.RuleCancelled(a) {
			e.Shown = "CANCELLED (rule)"
		}
		if s.EndedBadly() {
			e.StderrTail = a.Error
		}
	}
	return e
}

// observe emits an event for each change since the last observation. An
// activity seen before it ran and next seen after gets its RUNNING too
// (at its start time): a poll can miss a short state, a reader must not.
// The events of one observation are in the order of their times, earlier
// attempts first at equal times, so that an attempt's end is told before
// its retry.
func (w *watcher) observe(wf *state.WorkflowExec, acts []*state.ActivityExec) {
	now := time.Now()
	changed := false
	acts = slices.Clone(acts)
	slices.SortStableFunc(acts, func(a, b *state.ActivityExec) int {
		return cmp.Compare(workflow.AttemptOf(a), workflow.AttemptOf(b))
	})
	var evs []Event
	for _, a := range acts {
		if a.ItemIndex != nil {
			continue // an element of a map: its map's counts tell it (maps)
		}
		prev, seen := w.last[a.ActivityExecID]
		if seen && prev == a.State {
			continue
		}
		w.last[a.ActivityExecID] = a.State
		changed = true
		if a.State != state.Running && !a.StartTime.IsZero() && (!seen || prev.NotStarted()) {
			evs = append(evs, w.activity(a, state.Running, a.StartTime))
		}
		at := now
		if a.State.Terminal() && !a.EndTime.IsZero() {
			at = a.EndTime
		}
		evs = append(evs, w.activity(a, a.State, at))
	}
	evs = append(evs, w.maps(acts, now)...)
	changed = changed || len(evs) > 0
	slices.SortStableFunc(evs, func(a, b Event) int { return a.Time.Compare(b.Time) })
	for _, e := range evs {
		w.emit(e)
	}
	if wf.State != w.lastWF {
		w.lastWF = wf.State
		changed = true
		at := now
		if !wf.EndTime.IsZero() {
			at = wf.EndTime
		}
		w.emit(Event{Time: at, Kind: EventWorkflow, WorkflowExecID: w.id, State: string(wf.State), Reason: wf.Reason,
			StartTime: wf.StartTime, EndTime: wf.EndTime})
	}
	if !changed {
		w.emit(Event{Time: now, Kind: EventTick, WorkflowExecID: w.id})
	}
}

func (w *watcher) note(msg string) {
	w.emit(Event{Time: time.Now(), Kind: EventNote, WorkflowExecID: w.id, Message: msg})
}

func (w *watcher) ended(res *Result) {
	e := Event{Time: time.Now(), Kind: EventEnded, WorkflowExecID: w.id}
	if wf := res.Workflow; wf != nil {
		e.State, e.Reason, e.StartTime, e.EndTime = string(wf.State), wf.Reason, wf.StartTime, wf.EndTime
		if wf.FinallyFailed != "" {
			// The run fails for it (whimbrel run exits 1): say why.
			e.Message = "finally failed: " + wf.FinallyFailed
		}
	}
	w.emit(e)
}

// warnEvery is how often a repeated warning is logged.
const warnEvery = 10 * time.Second

// limiter lets a repeated warning through at most once per every, and
// counts the ones it held back.
type limiter struct {
	every time.Duration
	last  time.Time
	held  int
}

// allow reports whether to warn now, and how many warnings were held back
// since the last one let through.
func (l *limiter) allow(now time.Time) (int, bool) {
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.held++
		return 0, false
	}
	n := l.held
	l.last, l.held = now, 0
	return n, true
}

// maps emits, for each for_each map whose elements moved on since the
// last observation, one event with their counts: a map of ten thousand
// elements is one row, not ten thousand.
func (w *watcher) maps(acts []*state.ActivityExec, now time.Time) []Event {
	var evs []Event
	for _, a := range acts {
		if a.ItemIndex != nil {
			continue
		}
		c := workflow.CountElements(a, acts)
		if c == nil {
			continue
		}
		if w.counts == nil {
			w.counts = map[string]string{}
		}
		text := c.Text()
		if w.counts[a.ActivityName] == text {
			continue
		}
		w.counts[a.ActivityName] = text
		evs = append(evs, Event{Time: now, Kind: EventMap, WorkflowExecID: w.id, Activity: a.ActivityName,
			ActivityExecID: a.ActivityExecID, Map: c, Message: text})
	}
	return evs
}
