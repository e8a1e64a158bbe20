package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// The overlap policies: what a fire does while the schedule's previous run
// is still running (docs/schedules.md#overlap).
const (
	OverlapSkip           = "skip"            // record the fire time as skipped, with the reason
	OverlapQueue          = "queue"           // keep it due: start it once the previous run ended (at most one waits)
	OverlapAllow          = "allow"           // start it anyway
	OverlapCancelPrevious = "cancel-previous" // cancel the previous run, then start it
)

// checkOverlap checks a spec's overlap. An empty one allows, as an item
// stored without one does; whimbrel schedule set gives OverlapSkip unless
// told otherwise.
func checkOverlap(v string) (string, error) {
	switch v {
	case "":
		return OverlapAllow, nil
	case OverlapSkip, OverlapQueue, OverlapAllow, OverlapCancelPrevious:
		return v, nil
	}
	return "", invalid("--overlap %q: give skip, queue, allow or cancel-previous", v)
}

// previousRun returns the schedule's latest run, from its run log, if it
// has not ended; nil otherwise.
func previousRun(ctx context.Context, st Store, s *state.Schedule) (*state.WorkflowExec, error) {
	for _, line := range s.Runs { // newest first
		if line.WorkflowExecID == "" {
			continue
		}
		wf, err := st.GetWorkflow(ctx, line.WorkflowExecID)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil, nil // expired: long over
		case err != nil:
			return nil, fmt.Errorf("read the previous run %s: %w", line.WorkflowExecID, err)
		case wf.State.Terminal():
			return nil, nil
		}
		return wf, nil
	}
	return nil, nil
}

// overlap applies the schedule's overlap policy to the due fire time f
// before it is started. handled says it decided the step: the fire time
// was skipped (the cursor moved past it, in one conditional write that
// logs why), or it waits (wait: nothing more is due this tick). Otherwise
// the fire time is started as usual, after cancel-previous cancelled the
// run still going.
func overlap(ctx context.Context, st Store, s *state.Schedule, next func(time.Time) time.Time, f, now time.Time, r *Report) (wait, handled bool, err error) {
	if s.Overlap == "" || s.Overlap == OverlapAllow {
		return false, false, nil
	}
	if req, err := st.GetRequest(ctx, RequestID(s.Name, f), s.WorkflowName); err == nil && req.WorkflowExecID != "" {
		return false, false, nil // f's run was started already: finish recording it
	}
	prev, err := previousRun(ctx, st, s)
	if err != nil || prev == nil {
		return false, err != nil, err
	}
	skip := func(note string) (bool, bool, error) {
		v := s.Version
		s.LastFire, s.NextFire = f, next(f)
		logRun(s, state.ScheduleRun{Fire: f, At: wallNow(), Note: note})
		if err := st.PutSchedule(ctx, s, v, ""); err != nil {
			return false, true, err
		}
		r.Skipped++
		return false, true, nil
	}
	switch s.Overlap {
	case OverlapSkip:
		return skip(fmt.Sprintf("skipped: the previous run %s is still %s (overlap skip)", prev.WorkflowExecID, prev.State))
	case OverlapQueue:
		if n := next(f); !n.IsZero() && !n.After(now) {
			// A later fire time is due as well: it waits in f's place.
			return skip(fmt.Sprintf("skipped: the previous run %s is still %s and a later fire time waits instead (overlap queue)", prev.WorkflowExecID, prev.State))
		}
		return true, true, nil // f stays due: a later tick starts it once the previous run ended
	case OverlapCancelPrevious:
		why := fmt.Sprintf("cancelled by schedule %s: its fire time %s came (overlap cancel-previous)", s.Name, f.Format(time.RFC3339))
		var ce *state.ConflictError
		if _, err := workflow.Cancel(ctx, st, prev.WorkflowExecID, why, nil); err != nil && !errors.As(err, &ce) { // a conflict: it ended meanwhile
			return false, true, fmt.Errorf("cancel the previous run %s: %w", prev.WorkflowExecID, err)
		}
	}
	return false, false, nil
}
