package schedule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	def, _ := workflow.ParseStored(w.Definition)
	finals := workflow.Finals(def, acts)
	for _, a := range acts {
		if finals[a.ActivityExecID] != a || a.State == state.Completed || (a.Error == "" && a.ExitCode == nil) {
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
