package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// ErrorTailLines is how many of the last stderr lines a run's error keeps.
const ErrorTailLines = 3

// RunStatus is a line of the run log with what became of its run: the
// last run's status and error, read from the execution itself.
type RunStatus struct {
	state.ScheduleRun
	State   state.WorkflowState `json:"state,omitempty"`   // the execution's state, "" for a skip
	EndTime time.Time           `json:"end_time,omitzero"` // when it settled
	Error   string              `json:"error,omitempty"`   // the failed activity and its stderr tail
	Missing bool                `json:"missing,omitempty"` // the execution is gone (expired)
}

// Runs reads the state of the runs in a schedule's run log, newest first.
func Runs(ctx context.Context, st workflow.Reader, s *state.Schedule) ([]RunStatus, error) {
	out := make([]RunStatus, 0, len(s.Runs))
	for _, r := range s.Runs {
		v, err := runOf(ctx, st, r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// LastRun is the most recent run a schedule started, with its state and
// error; ok is false when it started none yet.
func LastRun(ctx context.Context, st workflow.Reader, s *state.Schedule) (r RunStatus, ok bool, err error) {
	for _, l := range s.Runs {
		if l.WorkflowExecID != "" {
			r, err := runOf(ctx, st, l)
			return r, err == nil, err
		}
	}
	return RunStatus{}, false, nil
}

func runOf(ctx context.Context, st workflow.Reader, r state.ScheduleRun) (RunStatus, error) {
	v := RunStatus{ScheduleRun: r}
	if r.Failed() {
		v.Error = FailureText(r)
	}
	if r.WorkflowExecID == "" {
		return v, nil
	}
	w, err := st.GetWorkflow(ctx, r.WorkflowExecID)
	if errors.Is(err, state.ErrNotFound) {
		v.Missing = true
		return v, nil
	}
	if err != nil {
		return v, fmt.Errorf("read run %s: %w", r.WorkflowExecID, err)
	}
	v.State, v.EndTime = w.State, w.EndTime
	if w.State == state.WorkflowCompleted || !w.State.Terminal() {
		return v, nil
	}
	acts, err := st.Activities(ctx, w.WorkflowExecID)
	if _, err = state.Skipped(err); err != nil { // a bad item is reported by the store
		return v, fmt.Errorf("read the activities of run %s: %w", r.WorkflowExecID, err)
	}
	// Each activity's final attempt: an earlier one that failed was
	// retried, and is not why the run failed.
	def, _ := definition.FromJSON(w.Definition)
	final := workflow.Finals(def != nil, acts)
	for _, a := range acts {
		if final[a.ActivityExecID] != a || a.State == state.Completed || (a.Error == "" && a.ExitCode == nil) {
			continue
		}
		msg := a.ActivityName + " " + string(a.State)
		if a.ExitCode != nil {
			msg += fmt.Sprintf(" (exit %d)", *a.ExitCode)
		}
		if tail := Tail(a.Error, ErrorTailLines); tail != "" {
			msg += ": " + tail
		}
		v.Error = msg
		return v, nil
	}
	v.Error = w.Reason
	return v, nil
}

// Failing is the newest line of a schedule's run log whose run failed to
// start, unless a later fire time started since: what makes a schedule
// unhealthy though its runs have not failed.
func Failing(s *state.Schedule) *state.ScheduleRun {
	for i, r := range s.Runs {
		switch {
		case r.WorkflowExecID != "":
			return nil
		case r.Failed():
			return &s.Runs[i]
		}
	}
	return nil
}

// FailureText says why a line's run did not start, how often it was
// tried, and whether and when it is tried again.
func FailureText(r state.ScheduleRun) string {
	tries := "1 try"
	if r.Tries != 1 {
		tries = fmt.Sprintf("%d tries", r.Tries)
	}
	switch {
	case GaveUp(r):
		return fmt.Sprintf("failed to start (%s, %s): %s", tries, r.Note, r.StartError)
	case r.RetryAt.IsZero():
		return fmt.Sprintf("failed to start (%s; tried again at the next tick): %s", tries, r.StartError)
	}
	return fmt.Sprintf("failed to start (%s; next try at %s): %s", tries, r.RetryAt.UTC().Format(time.RFC3339), r.StartError)
}

// LastError is what a schedule's listing shows as its last error: why its
// latest fire time failed to start, or else its last run's error.
func LastError(s *state.Schedule, last *RunStatus) string {
	if f := Failing(s); f != nil {
		return FailureText(*f)
	}
	if last != nil {
		return last.Error
	}
	return ""
}

// Tail is the last n non-empty lines of s, joined by " | ".
func Tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
