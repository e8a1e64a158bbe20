package monitor

import (
	"context"
	"errors"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// soonPerSweep is how many windows of not_before a sweep reads to put
// back the retries parked with a short delay that no launcher put back:
// the launchers that run read every window as it ends, and again a round
// later; a sweep reads a few, going on where the last one stopped, so
// that a fleet whose launchers run only now and then (--once) loses none.
const soonPerSweep = 4

// soonLimit bounds the retries a sweep puts back from one window.
const soonLimit = 1000

// dueSoon reads the next soonPerSweep windows of the round of the store's
// windows (state.DueRetryQueue), each at its latest end, and puts back
// what they list: retries due that a launcher missed. A round of 64
// windows is read in 16 sweeps.
func (s *sweep) dueSoon(ctx context.Context) error {
	q, ok := s.st.(state.DueRetryQueue)
	if !ok {
		return nil
	}
	cycle := max(q.RetryCycle(), 1)
	last := state.WindowEnd(s.now)
	at := int(last.UnixMilli() / state.RetryWindow.Milliseconds() % int64(cycle))
	s.due.mu.Lock()
	from := s.due.soon
	s.due.soon = (from + soonPerSweep) % cycle
	s.due.mu.Unlock()
	for i := range min(soonPerSweep, cycle) {
		// The latest end whose place in the round is from+i.
		back := ((at-(from+i))%cycle + cycle) % cycle
		end := last.Add(-time.Duration(back) * state.RetryWindow)
		refs, err := q.DueRetries(ctx, end, soonLimit)
		if err = s.skipped(err); err != nil {
			return err // the store's error names the window
		}
		for _, ref := range refs {
			err := q.UnparkRetry(ctx, ref.ActivityKey)
			switch {
			case err == nil:
				s.log.Debug("put back a retry due that no launcher put back", "activity_exec_id", ref.ActivityExecID)
			case errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound):
				// It moved on.
			case errors.Is(err, state.ErrUnavailable):
				return err
			default:
				s.log.Warn("could not put back a retry that is due", "activity_exec_id", ref.ActivityExecID, "error", err)
			}
		}
	}
	return nil
}
