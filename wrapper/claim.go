package wrapper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/whimbrel/whimbrel/state"
)

// claim checks that the workflow runs and moves the activity to RUNNING in
// one conditional write. It returns the claimed item, or nil and the exit
// status; and the termination signal that came while it was claiming, if
// one did. A signal ends the retries at once (the attempt in flight
// finishes, so that its outcome is known): the wrapper is being stopped,
// and Docker's stop timeout is shorter than claimTimeout.
func (r *run) claim(ctx context.Context, sigs chan os.Signal) (*state.ActivityExec, int, syscall.Signal) {
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	// retries ends with a signal; the attempts run on ctx alone.
	retries, stopRetries := context.WithCancel(ctx)
	defer stopRetries()
	var early syscall.Signal
	watched, watching := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			if s, ok := sig.(syscall.Signal); ok {
				early = s
			}
			stopRetries()
		case <-watching:
		}
	}()
	stopWatching := func() syscall.Signal {
		close(watching)
		<-watched
		return early
	}
	var claimed *state.ActivityExec
	var refused, last error
	uncertain := false  // an attempt whose answer was lost may have landed
	notRunning := false // refused because the workflow no longer runs
	host, _ := os.Hostname()
	op := func() error {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		wf, err := r.claimWorkflow(actx) // known.go
		r.wf = wf
		if err != nil {
			if errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem) {
				refused = err
				return backoff.Permanent(err)
			}
			last = err
			r.log.Warn("reading the workflow failed; retrying", "error", err)
			return err
		}
		if wf.State != state.WorkflowRunning {
			refused, notRunning = fmt.Errorf("workflow %s is %s, not RUNNING", wf.WorkflowExecID, wf.State), true
			return backoff.Permanent(refused)
		}
		claimed, err = r.st.UpdateActivity(actx, r.cfg.Key, state.ActivityChange{
			From: r.claimFrom(),
			To:   state.Running,
			Claim: &state.Claim{
				Owner: r.owner, Host: host, PID: os.Getpid(),
				HeartbeatEnabled:  r.cfg.Heartbeat,
				HeartbeatInterval: r.cfg.HeartbeatInterval,
				HeartbeatTimeout:  r.cfg.HeartbeatTimeout,
			},
			LaunchedAs: r.cfg.LaunchedAs,
		})
		var ce *state.ConflictError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ce) && ce.Owner == r.owner && ce.State == string(state.Running):
			// An earlier attempt whose answer was lost did land.
			claimed, err = r.st.GetActivity(actx, r.cfg.Key)
			return err
		case errors.As(err, &ce) && ce.Owner == r.owner:
			// It landed, and the activity has moved on since (timed out,
			// cancelled): it is ours to record, not to run.
			uncertain = true
			refused = err
			return backoff.Permanent(err)
		case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			refused = err
			return backoff.Permanent(err)
		}
		uncertain = true
		last = err
		r.log.Warn("claim failed; retrying", "error", err)
		return err
	}
	b := retryPolicy(100 * time.Millisecond)
	err := backoff.Retry(op, backoff.WithContext(b, retries))
	sig := stopWatching()
	if refused != nil || err != nil {
		if sig != 0 && refused == nil {
			// Stopped while the store did not answer: the activity is
			// recorded as failed by the signal (stoppedBeforeClaim).
			if uncertain {
				r.abandonWithin(signalRecordTimeout, fmt.Sprintf("claimed, but not started: %s received while the claim was retried", signalName(sig)))
			}
			r.log.Warn("not starting the command: stopped by a signal while claiming", "signal", signalName(sig), "error", last)
			return nil, 0, sig
		}
		if uncertain {
			r.abandon(fmt.Sprintf("claimed, but not started: %v", errors.Join(refused, err)))
		}
		if refused != nil && r.cfg.FromReady && errors.Is(refused, state.ErrConflict) {
			// No longer READY: another launcher claimed it first, it was
			// cancelled, or the listing that found it lagged behind its
			// claim by this launcher. Nothing of this run's is amiss, and
			// the activity's log, which may be its real run's, is no
			// place for it but at debug level.
			r.log.Debug("not starting the command: the activity is no longer READY", "error", refused)
			return nil, state.ExitClaimRefused, 0
		}
		if notRunning && r.cfg.FromReady {
			// The workflow ended or was cancelled after the launcher's
			// pass found the activity READY: the activity never ran, and
			// its log is no place for an error it can do nothing about.
			r.log.Debug("not starting the command: the workflow no longer runs", "error", refused)
			return nil, state.ExitClaimRefused, 0
		}
		if refused != nil {
			r.log.Error("not starting the command: the activity cannot be claimed", "error", refused)
			return nil, state.ExitClaimRefused, 0
		}
		if last != nil {
			err = last // more telling than the deadline that ended the retries
		}
		r.log.Error("not starting the command: the store could not be used", "error", err)
		return nil, state.ExitWrapperError, 0
	}
	return claimed, 0, sig
}

// stoppedBeforeClaim records an activity whose wrapper was stopped by sig
// before its claim landed: FAILED by the signal, if it is still waiting
// for a wrapper, written on a fresh context bounded well within a stop
// timeout. It returns 128+sig.
func (r *run) stoppedBeforeClaim(sig syscall.Signal) int {
	code := 128 + int(sig)
	if r.cfg.FromReady {
		// Nobody claimed the activity: it stays READY for the next
		// launcher, and READY → FAILED is no transition of the contract.
		r.log.Warn("not starting the command: stopped by a signal before claiming; the activity is left READY", "signal", signalName(sig))
		return code
	}
	reason := fmt.Sprintf("%s received before the command started (while claiming); it was not started", signalName(sig))
	ctx, cancel := context.WithTimeout(context.Background(), signalRecordTimeout)
	defer cancel()
	var failed *state.ActivityExec
	b := retryPolicy(100 * time.Millisecond)
	err := backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		var err error
		failed, err = r.st.UpdateActivity(actx, r.cfg.Key, state.ActivityChange{
			From: []state.ActivityState{state.Queued, state.Ready, state.Preparing}, To: state.Failed,
			Exit: &state.Exit{Code: code, Signal: signalName(sig)}, Reason: reason,
		})
		if errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx))
	switch {
	case errors.Is(err, state.ErrConflict):
		r.log.Warn("not recorded: the activity is no longer waiting for a wrapper", "signal", signalName(sig), "error", err)
		return code
	case err != nil:
		r.log.Error("stopped by a signal before the claim landed; NOT RECORDED", "signal", signalName(sig), "reason", reason, "error", err)
		return code
	}
	r.log.Warn("recorded", "state", failed.State, "reason", reason)
	if _, err := r.st.Recorded(ctx, failed, r.wf, r.log.Named("advance")); err != nil {
		r.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
	return code
}

// abandon records why on an activity this wrapper may have claimed but will
// not run, and advances the workflow, so nothing is left RUNNING with
// nobody running it.
func (r *run) abandon(why string) {
	r.abandonWithin(r.cfg.RecordTimeout, why)
}

// abandonWithin is abandon, bounded by d.
func (r *run) abandonWithin(d time.Duration, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	a, err := r.st.GetActivity(ctx, r.cfg.Key)
	if err != nil || a.Owner != r.owner {
		return // not ours: nothing to record
	}
	c := state.ActivityChange{From: []state.ActivityState{a.State}, Owner: r.owner, Reason: why}
	switch {
	case a.State == state.Running:
		c.To = state.Failed
	case !a.State.Terminal():
		return
	}
	done, err := r.st.UpdateActivity(ctx, r.cfg.Key, c)
	if err != nil {
		r.log.Warn("recording a claim that was not run failed; the monitor will time it out", "error", err)
		return
	}
	r.log.Warn("recorded a claim that was not run", "state", done.State, "why", why)
	if _, err := r.st.Recorded(ctx, done, r.wf, r.log.Named("advance")); err != nil {
		r.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
}

// claimFrom is the states the claim moves the activity from: READY alone
// when the supervisor's launcher made no claim of its own (FromReady), so
// that an activity another launcher moved to QUEUED for its own launch is
// never taken from it; otherwise any state a launch leaves it in.
func (r *run) claimFrom() []state.ActivityState {
	if r.cfg.FromReady {
		return []state.ActivityState{state.Ready}
	}
	return []state.ActivityState{state.Queued, state.Ready, state.Preparing}
}
