// Package view renders a local run's events (local.Event) for people and
// scripts: on a terminal a tree of the activities redrawn in place, with
// coloured states; elsewhere one line per change of state; with JSON one
// object per event. It decides nothing about the run: it only shows what
// the run reports.
package view

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/local"
	"github.com/whimbrel/whimbrel/state"
)

// Options choose how a run is shown.
type Options struct {
	Out io.Writer
	// JSON writes one JSON object per event (ticks left out), exact values
	// for scripts; it wins over TTY.
	JSON bool
	// TTY redraws a tree in place; otherwise one line per change.
	TTY bool
	// Width is the terminal's width; a redrawn row is cut to it (0: not cut).
	Width int
	// Colors paints the states (see inspect.ColorsFor).
	Colors inspect.Colors
}

// New returns the function a run hands its events to (local.Options.Events).
func New(d *definition.Workflow, o Options) func(local.Event) {
	if o.JSON {
		enc := json.NewEncoder(o.Out)
		return func(e local.Event) {
			if e.Kind != local.EventTick {
				_ = enc.Encode(e)
			}
		}
	}
	v := &people{Options: o, order: d.Names(), depth: depths(d), attempts: map[string]int{}, acts: map[string]local.Event{}}
	for _, n := range v.order {
		v.nameWidth = max(v.nameWidth, 2*v.depth[n]+len(n))
		v.attempts[n] = d.Effective(n).Retry.Attempts()
	}
	return v.show
}

// depths lays the DAG out as a tree: each activity one level under the
// deepest of what it depends on (as `whimbrel status` does).
func depths(d *definition.Workflow) map[string]int {
	depth := map[string]int{}
	for _, n := range d.Names() { // dependencies come first
		for _, up := range d.Activities[n].DependsOn {
			depth[n] = max(depth[n], depth[up]+1)
		}
	}
	return depth
}

// people is the view for a person: a tree on a terminal, lines elsewhere.
type people struct {
	Options
	order     []string
	depth     map[string]int
	nameWidth int
	attempts  map[string]int // the most runs each activity's retry policy allows
	id        string
	logDir    string
	acts      map[string]local.Event // the latest event of each activity's latest attempt
	wf        local.Event            // the latest workflow event
	lines     int                    // lines drawn last time, on a terminal
	maps      map[string]string      // each for_each map's counts, in words
}

func (v *people) show(e local.Event) {
	switch e.Kind {
	case local.EventStarted:
		v.id, v.logDir = e.WorkflowExecID, e.LogDir
		fmt.Fprintf(v.Out, "workflow %s started; logs in %s\n", inert.String(e.WorkflowExecID), inert.String(e.LogDir))
	case local.EventActivity:
		// The tree shows each activity's latest attempt; an earlier
		// attempt's end is a line of its own when its retry shows.
		prev, had := v.acts[e.Activity]
		latest := !had || e.Attempt >= prev.Attempt
		if latest {
			v.acts[e.Activity] = e
		}
		switch {
		case !v.TTY:
			v.line(e)
		case !latest:
			v.above(e)
		case had && e.Attempt > prev.Attempt && prev.ActivityState().Terminal():
			v.above(prev)
		}
	case local.EventMap:
		if v.maps == nil {
			v.maps = map[string]string{}
		}
		v.maps[e.Activity] = e.Message
		if !v.TTY {
			fmt.Fprintf(v.Out, "%s %-*s %s\n", e.Time.Local().Format("15:04:05"), v.nameWidth, v.name(e.Activity), inert.String(e.Message))
		}
	case local.EventWorkflow:
		v.wf = e
		if !v.TTY {
			fmt.Fprintf(v.Out, "%s workflow %s\n", e.Time.Local().Format("15:04:05"), v.Colors.Workflow(e.WorkflowState()))
		}
	case local.EventNote:
		fmt.Fprintln(v.Out, inert.String(e.Message))
		v.lines = 0 // the tree is drawn anew below the note
	case local.EventEnded:
		if v.TTY {
			v.draw(e.Time)
		}
		v.ended(e)
		return
	}
	if v.TTY && e.Kind != local.EventStarted && e.Kind != local.EventNote {
		v.draw(e.Time)
	}
}

// line is one line for an activity's change of state.
func (v *people) line(e local.Event) {
	fmt.Fprintf(v.Out, "%s %-*s %s%s%s\n", e.Time.Local().Format("15:04:05"), v.nameWidth, v.name(e.Activity),
		v.shown(e), detail(e), v.attempt(e, e.Time)+child(e))
}

// above writes an activity's line above the tree, on a terminal: the tree
// is cleared and drawn anew below it.
func (v *people) above(e local.Event) {
	if v.lines > 0 {
		fmt.Fprintf(v.Out, "\x1b[%dA\x1b[J", v.lines)
	}
	v.line(e)
	v.lines = 0
}

// attempt says which attempt e is when a retry policy applies (a first
// attempt only once it failed: a retry may follow), and when a retry
// waiting out its delay starts.
func (v *people) attempt(e local.Event, now time.Time) string {
	most, n := v.attempts[e.Activity], max(e.Attempt, 1)
	if n == 1 && (most <= 1 || !e.ActivityState().EndedBadly()) {
		return ""
	}
	out := fmt.Sprintf("  (attempt %d", n)
	if most > 1 {
		out += fmt.Sprintf(" of %d", most)
	}
	if e.ActivityState().NotStarted() && now.Before(e.NotBefore) {
		out += ", starts at " + e.NotBefore.Local().Format("15:04:05")
	}
	return out + ")"
}

// name is an activity's name indented by its depth in the tree.
func (v *people) name(n string) string {
	return strings.Repeat("  ", v.depth[n]) + inert.String(n)
}

// fit cuts a row to the terminal's width, so that redrawing in place
// never meets a wrapped line. It counts what shows, not colour codes.
func (v *people) fit(row string) string {
	if r := []rune(row); v.Width > 1 && len(r) > v.Width-1 {
		return string(r[:v.Width-2]) + "…"
	}
	return row
}

// draw redraws the tree in place.
func (v *people) draw(now time.Time) {
	if v.lines > 0 {
		fmt.Fprintf(v.Out, "\x1b[%dA", v.lines)
	}
	drawn := 0
	for _, n := range v.order {
		e, ok := v.acts[n]
		if !ok {
			continue
		}
		why := ""
		st := e.ActivityState()
		if st.EndedBadly() {
			why = detail(e)
		} else if !st.Terminal() {
			why = where(e)
		}
		why += v.attempt(e, now) + child(e)
		if m := v.maps[n]; m != "" {
			why += "  " + inert.String(m)
		}
		// The state's colour goes on after the row is cut to the width.
		shown := inert.String(e.State)
		row := v.fit(fmt.Sprintf("  %s %-*s  %-17s %8s%s", mark(st), v.nameWidth, v.name(n), shown, elapsed(e, now), why))
		fmt.Fprintf(v.Out, "\x1b[2K%s\n", paintFirst(row, shown, v.Colors.Activity(st)))
		drawn++
	}
	if v.wf.State != "" {
		took := ""
		if !v.wf.StartTime.IsZero() {
			end := v.wf.EndTime
			if end.IsZero() {
				end = now
			}
			took = inspect.Took(end.Sub(v.wf.StartTime))
		}
		shown := inert.String(v.wf.State)
		row := v.fit(fmt.Sprintf("  workflow %s %s", shown, took))
		fmt.Fprintf(v.Out, "\x1b[2K%s\n", paintFirst(row, shown, v.Colors.Workflow(v.wf.WorkflowState())))
		drawn++
	}
	v.lines = drawn
}

// paintFirst replaces the first whole-word occurrence of s in row with
// painted, s as the colours show it.
func paintFirst(row, s, painted string) string {
	if painted == s || s == "" {
		return row
	}
	i := strings.Index(row, " "+s+" ")
	if i < 0 {
		if strings.HasSuffix(row, " "+s) {
			i = len(row) - len(s) - 1
		} else {
			return row
		}
	}
	i++
	return row[:i] + painted + row[i+len(s):]
}

// marks are the symbols in front of each activity of the tree, so that
// states differ without colour too. Every state has one (a test walks
// state.ActivityStates); waiting states share the dot.
var marks = map[state.ActivityState]string{
	state.Requested:        "·",
	state.Ready:            "·",
	state.Queued:           "·",
	state.Preparing:        "·",
	state.Running:          "▶",
	state.Completed:        "✓",
	state.Failed:           "✗",
	state.TimedOut:         "✗",
	state.Cancelled:        "–",
	state.CancelledRunning: "–",
}

// mark is the symbol of an activity in s; a state that is not one of the
// contract's (a raw item's) gets a question mark.
func mark(s state.ActivityState) string {
	if m, ok := marks[s]; ok {
		return m
	}
	return "?"
}

// elapsed is how long an activity has run, or ran: the store's times, as
// `whimbrel status` shows them.
func elapsed(e local.Event, now time.Time) string {
	if e.StartTime.IsZero() {
		return ""
	}
	end := e.EndTime
	if end.IsZero() {
		if e.ActivityState().Terminal() {
			return ""
		}
		end = now
	}
	return inspect.Took(end.Sub(e.StartTime))
}

func detail(e local.Event) string {
	switch st := e.ActivityState(); {
	case st.EndedBadly():
		if e.Reason != "" {
			return "  " + inert.String(e.Reason)
		}
	case st == state.Completed:
		if !e.StartTime.IsZero() && !e.EndTime.IsZero() {
			return "  in " + inspect.Took(e.EndTime.Sub(e.StartTime))
		}
	case !st.Terminal():
		return where(e)
	}
	return ""
}

// ended prints how the run ended, and why, when it did not complete. The
// duration is the store's, the one `whimbrel status` shows.
func (v *people) ended(e local.Event) {
	if e.State == "" {
		return
	}
	took := ""
	if !e.StartTime.IsZero() && !e.EndTime.IsZero() {
		took = " in " + inspect.Took(e.EndTime.Sub(e.StartTime))
	}
	fmt.Fprintf(v.Out, "workflow %s %s%s\n", inert.String(e.WorkflowExecID), v.Colors.Workflow(e.WorkflowState()), took)
	if e.Message != "" {
		fmt.Fprintf(v.Out, "  %s\n", inert.String(e.Message)) // a finally activity failed
	}
	if e.WorkflowState() == state.WorkflowCompleted {
		return
	}
	if e.Reason != "" {
		fmt.Fprintf(v.Out, "  why: %s\n", inert.String(e.Reason))
	}
	var failed []local.Event
	for _, a := range v.acts {
		if a.ActivityState().EndedBadly() {
			failed = append(failed, a)
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].Activity < failed[j].Activity })
	for _, a := range failed {
		code := "no exit code"
		if a.ExitCode != nil {
			code = fmt.Sprintf("exit code %d", *a.ExitCode)
		}
		if most := v.attempts[a.Activity]; most > 1 {
			code += fmt.Sprintf(", attempt %d of %d", max(a.Attempt, 1), most)
		}
		fmt.Fprintf(v.Out, "activity %s %s (%s): %s\n", inert.String(a.Activity), v.Colors.Activity(a.ActivityState()), code, inert.String(a.Reason))
		if tail := strings.TrimRight(a.StderrTail, "\n"); tail != "" {
			fmt.Fprintln(v.Out, "  stderr (last lines):")
			lines := inert.Lines(tail)
			for _, l := range lines[max(0, len(lines)-10):] {
				fmt.Fprintln(v.Out, "    "+l)
			}
		}
		fmt.Fprintf(v.Out, "  full log: %s\n", inert.String(a.LogFile))
	}
}
