package inspect

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Retries is what Status shows of an activity's attempts, when its retry
// policy allows more than one: how many it may have, when the next one
// may start, and the earlier attempts, each as it ended.
type Retries struct {
	MaxAttempts int `json:"max_attempts,omitempty"`
	// NextAttemptAt is when the latest attempt, a retry waiting out its
	// delay, may start.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	// Earlier lists the attempts before the latest, first first.
	Earlier []Attempt `json:"earlier_attempts,omitempty"`
}

// Attempt is one earlier attempt of an activity.
type Attempt struct {
	ID         string              `json:"activity_exec_id"`
	Attempt    int                 `json:"attempt"`
	State      state.ActivityState `json:"state"`
	Reason     string              `json:"reason,omitempty"`
	Started    *time.Time          `json:"start_time,omitempty"`
	Ended      *time.Time          `json:"end_time,omitempty"`
	Host       string              `json:"host,omitempty"`
	PID        int                 `json:"pid,omitempty"`
	ExitCode   *int                `json:"exit_code,omitempty"`
	StderrTail string              `json:"stderr_tail,omitempty"`
	// Rejected lists the Simple Lambda API's events a processor refused
	// for this attempt.
	Rejected []RejectedEvent `json:"rejected_events,omitempty"`
}

// retriesOf builds the attempts view of latest, the latest attempt of its
// activity among acts; final maps each item to its activity's latest.
func retriesOf(def *definition.Workflow, latest *state.ActivityExec, acts []*state.ActivityExec, final map[string]*state.ActivityExec) Retries {
	var r Retries
	if def != nil && def.Activities[latest.ActivityName] != nil {
		if n := def.Effective(latest.ActivityName).Retry.Attempts(); n > 1 {
			r.MaxAttempts = n
		}
	}
	if latest.State == state.Ready && !latest.NotBefore.IsZero() {
		nb := latest.NotBefore
		r.NextAttemptAt = &nb
	}
	for _, a := range acts {
		if final[a.ActivityExecID] != latest || a == latest {
			continue
		}
		r.Earlier = append(r.Earlier, Attempt{ID: a.ActivityExecID, Attempt: workflow.AttemptOf(a), State: a.State,
			Reason: a.Reason, Started: timePtr(a.StartTime), Ended: timePtr(a.EndTime), Host: a.Host, PID: a.PID,
			ExitCode: a.ExitCode, StderrTail: a.Error})
	}
	sort.Slice(r.Earlier, func(i, j int) bool { return r.Earlier[i].Attempt < r.Earlier[j].Attempt })
	return r
}

// attemptText is the ATTEMPT column: "2 of 3" under a retry policy.
func (a Activity) attemptText() string {
	// A retry carries its attempt from its creation; a first attempt
	// from its claim.
	n := a.Attempt
	switch {
	case n == 0:
		return "-"
	case a.MaxAttempts > 1:
		return fmt.Sprintf("%d of %d", n, a.MaxAttempts)
	}
	return fmt.Sprint(n)
}

// writeRetries writes, under an activity's row, when its next attempt may
// start and how each earlier attempt ended.
func (a Activity) writeRetries(w io.Writer, indent string) {
	if a.NextAttemptAt != nil {
		fmt.Fprintf(w, "%snext attempt at %s UTC\n", indent, a.NextAttemptAt.UTC().Format("2006-01-02 15:04:05.000"))
	}
	for _, e := range a.Earlier {
		line := fmt.Sprintf("%sattempt %d: %s", indent, e.Attempt, e.State)
		if e.ExitCode != nil {
			line += fmt.Sprintf(" (exit %d)", *e.ExitCode)
		}
		if e.Ended != nil {
			line += " at " + clock(e.Ended)
		}
		if e.Host != "" && e.PID > 0 {
			line += fmt.Sprintf(" on %s pid %d", e.Host, e.PID)
		}
		if tail := strings.TrimRight(e.StderrTail, "\n"); tail != "" {
			lines := strings.Split(tail, "\n")
			line += ": " + printable(lines[len(lines)-1])
		} else if e.Reason != "" {
			line += ": " + printable(e.Reason)
		}
		fmt.Fprintln(w, line)
		for _, r := range e.Rejected {
			fmt.Fprintf(w, "%s  rejected event %s (%s): %s\n", indent, printable(r.Transition), printable(r.ID), printable(r.Reason))
		}
	}
}

// printable replaces control characters, which a command's stderr may
// hold, so that an attempt's line cannot move the cursor or recolour the
// terminal. A tab (stack traces indent with it) is kept.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
