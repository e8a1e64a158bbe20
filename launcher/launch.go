package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// try claims and launches one activity; launched is true when the backend
// started it.
func (l *Launcher) try(ctx context.Context, p *pass, ref state.ActivityRef) (launched bool, err error) {
	k := ref.ActivityKey
	if launched, tried, err := l.tryUnread(ctx, p, ref); tried { // fromready.go
		return launched, err
	}
	// The index is eventually consistent: read the item itself.
	a, err := l.st.GetActivity(ctx, k)
	if err != nil {
		return false, err
	}
	if a.State != state.Ready {
		return false, nil
	}
	if !a.NotBefore.IsZero() && clock.Now().Before(a.NotBefore) {
		l.slots.wait(k, a.NotBefore)
		l.pools.mark(k.ActivityExecID) // it holds no slot while it waits
		return false, nil              // a retry waiting out its delay
	}
	w, err := l.workflow(ctx, p, k.WorkflowExecID)
	if err != nil {
		return false, err
	}
	l.pools.mark(k.ActivityExecID)
	if w.state != state.WorkflowRunning || w.def == nil {
		return false, nil // the monitor cancels what a settled workflow left
	}
	act := w.def.Lookup(a.ActivityName) // an activity or a finally one
	if act.IsChild() {
		return false, l.tryChild(ctx, k, a)
	}
	var settings definition.Settings
	var backend Backend
	if act != nil {
		settings = w.def.Effective(a.ActivityName)
		if settings.Pool != "" {
			if wait, err := l.poolGate(ctx, p, a, settings, l.cfg.Backends[settings.Launch.Type] != nil); wait {
				return false, err
			}
		}
		if backend = l.cfg.Backends[settings.Launch.Type]; backend == nil {
			return false, nil // for a launcher with that backend
		}
	}
	if ctx.Err() != nil {
		return false, nil // stopping: claim nothing more
	}
	if job, ok := l.fromReady(a, w, act, settings, backend); ok { // fromready.go
		return l.tryFromReady(ctx, a, job, backend)
	}

	// Claimed or not, the claim's answer must be known, and a claimed
	// activity must end launched or failed: from here on, every store
	// call has a fresh context with its own deadline.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	claimed, err := l.claim(cctx, k)
	cancel()
	if claimed == nil || err != nil {
		l.poolUnclaimed(ctx, settings, k)
		return false, err
	}
	fault.Point(fault.AfterClaim)
	log := l.log.With("activity_exec_id", k.ActivityExecID)
	if act == nil {
		return false, l.fail(ctx, claimed, "", FailedUnknownActivity, fmt.Errorf("activity %q is not in the workflow's definition", a.ActivityName))
	}
	job := l.job(claimed, w.def, act, settings)
	job.Token = claimed.Owner
	job.Workflow = w.item
	launchedAs, err := l.launch(ctx, backend, job, log)
	if err != nil {
		log.Warn("launch failed", "error", err)
		return false, l.fail(ctx, claimed, settings.Launch.Type, FailedBackend, err)
	}
	waited := waitedSince(a, time.Now())
	log.Info("launched", "as", launchedAs, "type", settings.Launch.Type)
	// The wrapper may have moved on already; the record goes beside
	// whatever state it finds, unless the wrapper's claim writes it
	// (knownitem.go).
	if err := l.record(ctx, func(rctx context.Context) error {
		if claimRecords(backend, job) {
			return nil
		}
		_, err := l.st.UpdateActivity(rctx, k, state.ActivityChange{From: state.ActivityStates, LaunchedAs: launchedAs})
		return err
	}); err != nil {
		log.Warn("recording the launch failed", "as", launchedAs, "error", err)
	}
	if l.cfg.Observer != nil {
		l.cfg.Observer.Launched(claimed, settings.Launch.Type, waited)
	}
	return true, nil
}

// launch calls the backend until it starts the activity, fails for good,
// or the launch deadline passes. Each call has its own deadline; a call
// cut off by it may have started the activity, so it is tried again with
// the same job, whose launch token the backend deduplicates. When ctx ends
// the call in flight finishes, but no new attempt is made.
func (l *Launcher) launch(ctx context.Context, backend Backend, j Job, log hclog.Logger) (string, error) {
	retryFor := l.cfg.RetryFor
	if rf := time.Duration(j.Settings.Launch.RetryFor); rf > 0 {
		retryFor = rf
	} else {
		// The monitor fails an activity QUEUED for longer than its queued
		// timeout: give up well before it.
		qt := time.Duration(j.Settings.QueuedTimeout)
		if qt == 0 {
			qt = definition.DefaultQueuedTimeout
		}
		retryFor = min(retryFor, qt*3/4)
	}
	callTimeout := l.cfg.CallTimeout
	if p, ok := backend.(patient); ok {
		callTimeout = max(callTimeout, p.CallTimeout())
	}
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(retryFor))
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = l.cfg.RetryInterval
	b.Multiplier = 2
	b.MaxInterval = max(maxRetryInterval, l.cfg.RetryInterval)
	b.MaxElapsedTime = 0 // rctx's deadline ends the retries
	var as string
	var last error
	attempts := 0
	unknown := false // an attempt was cut off: it may have started the activity
	err := backoff.RetryNotify(func() error {
		if unknown {
			// Before repeating a launch that may have happened, look: a
			// wrapper that claimed the activity proves the launch, and a
			// repeat could start a second container or task (Docker's
			// --rm frees the name once the first has exited).
			done, err := l.claimedSince(ctx, j)
			if err != nil {
				last = err
				return backoff.Permanent(err)
			}
			if done != "" {
				as = done
				return nil
			}
		}
		attempts++
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		var err error
		as, err = backend.Launch(callCtx, j)
		var temp *TemporaryError
		switch {
		case err == nil:
			return nil
		case errors.Is(callCtx.Err(), context.DeadlineExceeded):
			unknown = true
			last = fmt.Errorf("no answer within %s (the launch may have happened: it is tried again under the same launch token %s): %w",
				callTimeout, j.LaunchToken(), err)
			return last
		case errors.As(err, &temp):
			last = err
			return err
		}
		last = err
		return backoff.Permanent(err)
	}, backoff.WithContext(b, rctx), func(err error, wait time.Duration) {
		log.Warn("launch failed for a reason that may pass; trying again", "error", err, "in", wait.Round(time.Millisecond), "attempt", attempts)
	})
	switch {
	case err == nil:
		return as, nil
	case last == nil:
		return "", err
	case ctx.Err() != nil && time.Since(start) < retryFor:
		return "", fmt.Errorf("the launcher stopped while retrying the launch (%d attempts): %w", attempts, last)
	case errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("gave up after %s and %d attempts: %w", time.Since(start).Round(time.Second), attempts, last)
	}
	return "", err
}

// claimedSince reads the activity before a launch whose outcome is unknown
// is repeated. It returns what is known of the launch when a wrapper has
// claimed the activity since (the launch happened: it must not be
// repeated), "" when the activity is still QUEUED under this launch's
// token (nothing claimed it yet: the repeat goes ahead, deduplicated by
// the backend while the first container or task lives), and an error when
// the activity has moved on without a claim (cancelled, or failed by
// Exited): there is nothing left to launch.
func (l *Launcher) claimedSince(ctx context.Context, j Job) (string, error) {
	var a *state.ActivityExec
	err := l.record(ctx, func(rctx context.Context) error {
		var err error
		a, err = l.st.GetActivity(rctx, j.Key)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading the activity before repeating a launch whose answer was lost: %w", err)
	}
	switch {
	case a.State == state.Queued && a.Owner == j.Token:
		return "", nil
	case a.Owner != "" && a.Owner != j.Token:
		// A wrapper's claim replaced the launcher's token.
		where := "its wrapper claimed it"
		if a.Host != "" {
			where = fmt.Sprintf("its wrapper claimed it on host %s, pid %d", a.Host, a.PID)
		}
		return fmt.Sprintf("unknown: the launch call (launch token %s) was cut off before its answer, and %s", j.LaunchToken(), where), nil
	}
	return "", fmt.Errorf("the launch call was cut off before its answer, and the activity is now %s without a wrapper's claim: not launching it again", a.State)
}

// record runs one recording write on a fresh context with its own
// deadline, retrying what may pass, so that neither an expired launch nor
// a shutdown can leave the outcome unwritten.
func (l *Launcher) record(ctx context.Context, write func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxElapsedTime = 0
	var last error
	err := backoff.Retry(func() error {
		err := write(rctx)
		if err != nil && (errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound)) {
			return backoff.Permanent(err)
		}
		if err != nil {
			last = err
		}
		return err
	}, backoff.WithContext(b, rctx))
	if err != nil && last != nil && errors.Is(err, context.DeadlineExceeded) {
		return last
	}
	return err
}

// claim moves a READY activity to QUEUED under a fresh token, and returns
// it when the move was this launcher's, nil when another launcher's. A
// write whose answer was lost (the SDK resends it, and the resend finds its
// own earlier move) is recognised by the token.
func (l *Launcher) claim(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	token := "launcher:" + uuid.NewString()
	claimed, err := l.st.UpdateActivity(ctx, k, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: token,
	})
	var ce *state.ConflictError
	switch {
	case err == nil:
		return claimed, nil
	case errors.As(err, &ce) && ce.Owner != token:
		return nil, nil // another launcher was first
	case errors.As(err, &ce):
		// Our own move landed; fall through to read it.
	}
	// The read-back is retried as a record is: a claim that landed and is
	// not launched stays QUEUED until the monitor fails it, unrun.
	var a *state.ActivityExec
	rerr := l.record(ctx, func(rctx context.Context) error {
		var err error
		a, err = l.st.GetActivity(rctx, k)
		return err
	})
	if rerr != nil {
		return nil, fmt.Errorf("claim %s: %w (and reading it back: %v)", k.ActivityExecID, err, rerr)
	}
	if a.State == state.Queued && a.Owner == token {
		return a, nil
	}
	return nil, nil
}

// Exited is told by a backend that the process it started for j has
// ended, with the error its wait returned (nil: it exited 0). If the
// wrapper never claimed the activity (it is still QUEUED under the
// launcher's token), it will never run: it is failed now, with why,
// instead of waiting for the queued timeout. Under MaxRunning the
// process's slot is free at once, and a pass starts to fill it.
func (l *Launcher) Exited(ctx context.Context, j Job, exit error) {
	// Its process is gone, so it holds no slot any more (forgetEnded
	// would learn so from the store at a later pass).
	if l.slots.exited(j.Key) {
		l.wake()
	}
	if j.Token == "" || exit == nil {
		// whimbrel-run exits 0 only after its claim (a refused claim,
		// or a signal before it, exits otherwise): there is nothing to
		// fail, and the conditional write that would find so costs a
		// write of the store per activity.
		return
	}
	msg := fmt.Sprintf("whimbrel-run exited (%s) before claiming the activity", exit)
	failed, err := l.st.UpdateActivity(ctx, j.Key, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: j.Token,
		Error: msg, Reason: "launch failed: " + msg,
	})
	if err != nil {
		if !errors.Is(err, state.ErrConflict) { // claimed after all: its wrapper recorded the rest
			l.log.Warn("recording a wrapper that never claimed failed", "activity_exec_id", j.Key.ActivityExecID, "error", err)
		}
		return
	}
	l.log.Warn("a wrapper exited before claiming its activity", "activity_exec_id", j.Key.ActivityExecID, "status", exit.Error())
	if l.cfg.Observer != nil {
		l.cfg.Observer.LaunchFailed(j.Key, j.Settings.Launch.Type, FailedExited)
	}
	if _, err := workflow.Advance(ctx, l.st, failed, l.log.Named("advance")); err != nil {
		l.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
}

// fail records a launch that did not happen and advances the workflow,
// on a fresh context: the launch's own deadline may be spent.
func (l *Launcher) fail(ctx context.Context, a *state.ActivityExec, launchType string, why LaunchFailure, cause error) error {
	msg := cause.Error()
	var failed *state.ActivityExec
	err := l.record(ctx, func(rctx context.Context) error {
		var err error
		failed, err = l.st.UpdateActivity(rctx, a.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: a.Owner,
			Error: msg, Reason: "launch failed: " + msg,
		})
		return err
	})
	if errors.Is(err, state.ErrConflict) {
		return nil // no longer ours: its wrapper claimed it, or it was cancelled
	}
	if err != nil {
		return fmt.Errorf("record the failed launch of %s: %w", a.ActivityExecID, err)
	}
	if l.cfg.Observer != nil {
		l.cfg.Observer.LaunchFailed(a.ActivityKey, launchType, why)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err = workflow.Advance(actx, l.st, failed, l.log.Named("advance"))
	return err
}

// definitions caches the parsed definitions of the workflows whose
// activities the launcher launches: a definition never changes.
type definitions struct {
	mu   sync.Mutex
	byID map[string]*definition.Workflow // by workflow_exec_id
	// items are the workflows' items as first read, definition and all
	// (knownitem.go).
	items map[string]*state.WorkflowExec
}

// of returns the definition of wf, parsing it the first time.
func (c *definitions) of(wf *state.WorkflowExec) (*definition.Workflow, error) {
	c.mu.Lock()
	d := c.byID[wf.WorkflowExecID]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	if wf.Definition == "" {
		return nil, fmt.Errorf("workflow %s has no stored definition (it was not started with whimbrel start), so its activities cannot be launched from here", wf.WorkflowExecID)
	}
	d, err := definition.FromJSON(wf.Definition)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", wf.WorkflowExecID, err)
	}
	c.mu.Lock()
	c.byID[wf.WorkflowExecID] = d
	c.keep(wf)
	c.mu.Unlock()
	return d, nil
}

// known returns the definition of the workflow id if it was parsed
// before, else nil.
func (c *definitions) known(id string) *definition.Workflow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id]
}

// forget drops the definition of a workflow that launches no more.
func (c *definitions) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
	delete(c.items, id)
}

// job builds what the backend needs.
func (l *Launcher) job(a *state.ActivityExec, def *definition.Workflow, act *definition.Activity, s definition.Settings) Job {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range l.cfg.StoreEnv {
		env[k] = v
	}
	env[state.EnvActivityExecID] = a.ActivityExecID
	env[state.EnvActivityName] = a.ActivityName
	env[state.EnvWorkflowExecID] = a.WorkflowExecID
	env[state.EnvWorkflowName] = def.Name
	for name, d := range map[string]definition.Duration{
		state.EnvHeartbeatInterval: s.HeartbeatInterval,
		state.EnvHeartbeatTimeout:  s.HeartbeatTimeout,
		state.EnvTimeout:           s.Timeout,
		state.EnvKillGrace:         s.KillGrace,
	} {
		if d > 0 {
			env[name] = time.Duration(d).String()
		}
	}
	return Job{Key: a.ActivityKey, WorkflowName: def.Name, ActivityName: a.ActivityName, Attempt: a.Attempt,
		Command: act.Command, Env: env, Settings: s}
}
