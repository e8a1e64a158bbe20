package launcher

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// Retries due soon (state.DueRetryQueue): a retry with a delay is parked,
// out of the READY listing, and the launchers put it back as it becomes
// due. Each pass reads the windows of not_before that have ended since
// the launcher's last read, puts back what they list, one conditional
// write each, and takes those it put back into the pass itself, whatever
// an index that lags lists. A window with more due retries than a pass
// puts back is read again by the next pass. A retry a launcher missed
// (it died between the listing and the put back, or ran only now and
// then) is listed again by every window of the same bucket that ends
// later, so the launchers that run put it back within a round of the
// store's windows, and the monitor's sweeps, which read a few windows
// each, within a few minutes.

// dueWindows is what a launcher remembers of the windows it has read.
type dueWindows struct {
	mu   sync.Mutex
	read time.Time // the end of the last window read in full; zero: none yet
}

// firstWindows is how many windows a launcher's first pass reads: the
// retries that became due while it was starting (or stopped for a
// moment) are put back by it at once, older ones within a round.
const firstWindows = 2

// putBackDue puts back the parked retries that the windows ended since
// the last pass list, at most scan of them, and returns those it put
// back.
func (l *Launcher) putBackDue(ctx context.Context) []state.ActivityRef {
	q, ok := l.st.(state.DueRetryQueue)
	if !ok {
		return nil
	}
	l.due.mu.Lock()
	defer l.due.mu.Unlock()
	last := state.WindowEnd(clock.Now())
	from := l.due.read.Add(state.RetryWindow)
	if l.due.read.IsZero() {
		from = last.Add(-(firstWindows - 1) * state.RetryWindow)
	}
	// The last round of windows lists every due retry: reading further
	// back would list the same ones again.
	if oldest := last.Add(-time.Duration(max(q.RetryCycle(), 1)-1) * state.RetryWindow); from.Before(oldest) {
		from = oldest
	}
	budget := scan
	var back []state.ActivityRef
	for end := from; !end.After(last) && budget > 0 && ctx.Err() == nil; end = end.Add(state.RetryWindow) {
		refs, err := q.DueRetries(ctx, end, budget+1)
		skipped, err := state.Skipped(err)
		l.undecodable.Add(int64(len(skipped)))
		if err != nil {
			l.log.Warn("listing the retries due failed; the next pass lists them again", "window_end", end, "error", err)
			if l.due.read.IsZero() {
				l.due.read = end.Add(-state.RetryWindow)
			}
			return back
		}
		more := len(refs) > budget
		if more {
			refs = refs[:budget]
		}
		got, failed := l.unparkDue(ctx, q, refs)
		if len(refs) > 0 {
			l.log.Debug("put back retries that are due", "window_end", end, "listed", len(refs), "put_back", len(got))
		}
		back = append(back, got...)
		budget -= len(refs)
		if more || failed {
			// The next pass reads this window again: on a first pass,
			// remember the window before it, or the next would start
			// from its own last windows and skip the rest of this one.
			if l.due.read.IsZero() {
				l.due.read = end.Add(-state.RetryWindow)
			}
			return back
		}
		l.due.read = end
	}
	return back
}

// unparkDue puts back the listed retries, a few at a time, and returns
// those it put back; failed is true when a write failed for a reason
// other than the retry having moved on.
func (l *Launcher) unparkDue(ctx context.Context, q state.RetryQueue, refs []state.ActivityRef) (back []state.ActivityRef, failed bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, parkers)
	for _, ref := range refs {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := q.UnparkRetry(ctx, ref.ActivityKey)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				back = append(back, ref)
			case errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound):
				// It moved on, and left the listing with its move.
			default:
				failed = true
				l.log.Warn("putting back a retry that is due failed; the next pass tries again", "activity_exec_id", ref.ActivityExecID, "error", err)
			}
		}()
	}
	wg.Wait()
	return back, failed
}

// withDue adds to a pass's READY listing the retries it put back that
// the listing lacks: an index that lags may not list them yet.
func withDue(refs, due []state.ActivityRef) []state.ActivityRef {
	if len(due) == 0 {
		return refs
	}
	listed := make(map[state.ActivityKey]bool, len(refs))
	for _, r := range refs {
		listed[r.ActivityKey] = true
	}
	for _, r := range due {
		if !listed[r.ActivityKey] {
			refs = append(refs, r)
			listed[r.ActivityKey] = true
		}
	}
	return refs
}
