package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// retryDue remembers the not_before of the parked retries a monitor has
// read: it never changes, so each parked retry is read once by a monitor,
// however many sweeps list it before it is due.
type retryDue struct {
	mu   sync.Mutex
	at   map[state.ActivityKey]time.Time
	soon int // where the next sweep's windows of retries due soon start (retrysoon.go)
}

// waitingRetries sweeps the retries parked while they wait out their
// delay (state.RetryQueue), which the READY listing leaves out: each is
// judged as a READY activity (one of a workflow that ended is cancelled),
// and each whose not_before has passed is put back in the READY listing,
// where the launchers' next pass finds it. A parked retry thus starts
// within a sweep interval and a pass interval of its not_before.
func (s *sweep) waitingRetries(ctx context.Context) error {
	q, ok := s.st.(state.RetryQueue)
	if !ok {
		return nil
	}
	// The retries due soon and those due later are listed apart: a
	// failed read of the one leaves the other's sweep to go on.
	if err := s.dueSoon(ctx); err != nil {
		if ctx.Err() != nil {
			return err
		}
		s.log.Warn("could not read the retries due soon; the next sweep reads them again", "error", err)
	}
	refs, err := q.WaitingRetries(ctx)
	if err = s.skipped(err); err != nil {
		return fmt.Errorf("list the waiting retries: %w", err)
	}
	listed := make(map[state.ActivityKey]bool, len(refs))
	for _, ref := range refs {
		listed[ref.ActivityKey] = true
		// They are READY: the metrics count them with the others, but
		// not as READY activities waiting to be launched.
		if s.cfg.Workflow == "" || ref.WorkflowExecID == s.cfg.Workflow {
			s.seen.Activities[NameState{NameOf(ref.WorkflowExecID), string(state.Ready)}]++
		}
	}
	s.due.forgetAllBut(listed)
	for _, ref := range refs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !s.scope.Has(ctx, s.st, ref.WorkflowExecID) {
			continue
		}
		err := s.judge(ctx, ref.ActivityKey, state.Ready)
		if err == nil {
			err = s.unparkIfDue(ctx, q, ref.ActivityKey)
		}
		switch {
		case errors.Is(err, state.ErrUnavailable):
			return err
		case errors.Is(err, state.ErrInvalidItem):
			s.report.Undecodable++
		case err != nil:
			s.log.Warn("could not judge a waiting retry", "activity_exec_id", ref.ActivityExecID, "error", err)
		}
	}
	return nil
}

// unparkIfDue puts k back in the READY listing once its not_before has
// passed, reading it the first time the monitor meets it.
func (s *sweep) unparkIfDue(ctx context.Context, q state.RetryQueue, k state.ActivityKey) error {
	at, known := s.due.get(k)
	if !known {
		a, err := s.st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if a.State != state.Ready {
			return nil // it moved on: its move took it out of the listing
		}
		at = a.NotBefore
		s.due.set(k, at)
	}
	if s.now.Before(at) {
		return nil
	}
	err := q.UnparkRetry(ctx, k)
	if errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound) {
		err = nil // it moved on
	}
	if err != nil {
		return fmt.Errorf("put back a waiting retry: %w", err)
	}
	s.due.forget(k)
	s.log.Debug("put back a retry whose delay is over", "activity_exec_id", k.ActivityExecID, "not_before", at)
	return nil
}

func (d *retryDue) get(k state.ActivityKey) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.at[k]
	return t, ok
}

func (d *retryDue) set(k state.ActivityKey, t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[state.ActivityKey]time.Time{}
	}
	d.at[k] = t
}

func (d *retryDue) forget(k state.ActivityKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.at, k)
}

// forgetAllBut drops the retries no longer listed: they moved on.
func (d *retryDue) forgetAllBut(listed map[state.ActivityKey]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.at {
		if !listed[k] {
			delete(d.at, k)
		}
	}
}
