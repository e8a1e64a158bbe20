// Package wrapper runs one activity under the client contract, as
// whimbrel-run does: it claims the activity (→ RUNNING), runs its command,
// keeps the lease alive with heartbeats, stops the command when the
// activity is cancelled, timed out or its lease is lost, records how the
// command ended, and has the workflow advanced (see Reporter).
package wrapper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
)

// Defaults of Config.
const (
	DefaultRecordTimeout = 5 * time.Minute
	// claimTimeout bounds the claim through passing store errors; nothing
	// has started yet, so giving up is cheap. A termination signal ends
	// the retries at once.
	claimTimeout = time.Minute
	// signalRecordTimeout bounds the recording of a signal that came
	// before the command started, well within Docker's stop timeout (the
	// Docker backend's is the kill grace plus 10 s; Docker's default 10 s).
	signalRecordTimeout = 8 * time.Second
	// attemptTimeout bounds one call to the store, so a connection that
	// hangs is given up on and tried again.
	attemptTimeout = 10 * time.Second
	// maxRetryWait caps the wait between two attempts, so that a store
	// back from an outage is used within a couple of seconds: an outcome
	// that waited a minute between attempts (the library's default cap)
	// would land after the monitor had judged the activity.
	maxRetryWait = 2 * time.Second
)

// retryPolicy is the policy of every retried call to the store: exponential
// from first, capped at maxRetryWait, bounded by the caller's context.
func retryPolicy(first time.Duration) *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(first),
		backoff.WithMaxInterval(maxRetryWait), backoff.WithMaxElapsedTime(0))
}

// Config describes one run of an activity.
type Config struct {
	Key     state.ActivityKey
	Command []string

	// Heartbeat enables heartbeats; Interval and Timeout default to the
	// contract's (state.DefaultHeartbeatInterval, DefaultHeartbeatTimeout).
	Heartbeat         bool
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// KeepRunningOnLeaseLoss lets the command run to its end when the
	// activity is timed out or the lease is lost, instead of stopping it.
	// The state is not changed either way. Cancellation always stops it.
	KeepRunningOnLeaseLoss bool

	KillGrace     time.Duration // between SIGTERM and SIGKILL (default state.DefaultKillGrace)
	Timeout       time.Duration // the command's longest run (0: none)
	RecordTimeout time.Duration // how long the final writes retry (default DefaultRecordTimeout)
	Subreaper     bool          // reap orphans even when not PID 1
	// SignalChildOnly relays signals to the command alone rather than its
	// process group (tini's default; whimbrel-run's is the group, tini -g).
	SignalChildOnly bool
	// Guard stops the command's process group if the wrapper is killed
	// outright (kill -9) when it is not PID 1 (see process.Config.Guard).
	Guard bool
	// GuardPipe, with Guard, is the write end of a guard pipe whose read
	// end the supervising launcher watches (process.Config.GuardPipe).
	GuardPipe *os.File
	// ParentDeathSignal, when not 0, is sent to the wrapper itself when its
	// parent dies (tini -p): SIGTERM stops the command as a docker stop
	// would, and the outcome is recorded.
	ParentDeathSignal syscall.Signal
	// Nudge is the address of a local launcher to wake when this activity
	// readies dependents (see package nudge).
	Nudge string
	// Watcher, when set, tells the wrapper at once that its activity was
	// taken from it (cancelled, timed out), so that it beats at once and
	// stops its command instead of finding out at its next heartbeat.
	Watcher Watcher
	// DataDir is where the directory of the WHIMBREL_INPUTS, _OUTPUT and
	// _PROGRESS files is made (empty: the system's temporary directory).
	DataDir string

	// Signals, when set, carries the termination signals, caught by the
	// caller with CatchSignals from its very start (before it opens the
	// store), so that none arriving before Run is lost; Run stops
	// catching them when it returns. nil: Run catches them itself.
	Signals chan os.Signal

	// Stdin and Stdout are handed to the command; nil means the wrapper's.
	Stdin, Stdout *os.File
	// Stderr receives the command's stderr; nil means the wrapper's.
	Stderr *os.File
	Logger hclog.Logger
}

// Run runs the activity to its end, reporting through st, and returns the wrapper's exit status:
// the command's, 128+N when the command died of signal N, or one of the
// contract's for the wrapper's own outcomes (state.ExitDataRefused to
// state.ExitNotFound).
func Run(ctx context.Context, st Reporter, cfg Config) int {
	if cfg.RecordTimeout == 0 {
		cfg.RecordTimeout = DefaultRecordTimeout
	}
	if cfg.Heartbeat {
		if cfg.HeartbeatInterval == 0 {
			cfg.HeartbeatInterval = state.DefaultHeartbeatInterval
		}
		if cfg.HeartbeatTimeout == 0 {
			cfg.HeartbeatTimeout = state.DefaultHeartbeatTimeout
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	r := &run{st: st, cfg: cfg, log: cfg.Logger.With("activity_exec_id", cfg.Key.ActivityExecID),
		owner: uuid.NewString()}
	return r.run(ctx)
}

type run struct {
	st    Reporter
	cfg   Config
	log   hclog.Logger
	owner string

	wf   *state.WorkflowExec // as read by the claim
	wake watching            // the watch of the activity, if the store offers one
	data *data               // the command's data files, once made

	mu         sync.Mutex
	stopReason string // why the wrapper stopped the command, if it did
	timedOut   bool   // --timeout expired

	output          string // the command's output, to record with the outcome
	outputRefused   bool   // the output file was refused: the activity fails
	progressProblem string // the last problem with the progress file, logged once
}

func (r *run) run(ctx context.Context) int {
	if r.cfg.ParentDeathSignal != 0 {
		ppid := os.Getppid()
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(r.cfg.ParentDeathSignal), 0, 0, 0); err != nil {
			r.log.Warn("the parent-death signal could not be set", "error", err)
		} else if os.Getppid() != ppid {
			// The parent died before the signal was armed.
			_ = unix.Kill(os.Getpid(), r.cfg.ParentDeathSignal)
		}
	}
	// Termination signals are caught from the start: one that arrives
	// while the claim is in flight must not kill the wrapper between a
	// landed claim and the command, leaving the activity RUNNING with
	// nothing running. The same channel then feeds the runner's
	// forwarder, so one caught after the check below reaches the command.
	sigs := r.cfg.Signals
	if sigs == nil {
		sigs = CatchSignals()
	}
	// The watch starts before the claim, so that a cancellation that lands
	// at any time after it is heard: its wake waits in the channel.
	if r.cfg.Heartbeat {
		r.wake = r.watch()
		defer r.wake.stop()
	}
	claimed, code, early := r.claim(ctx, sigs)
	if claimed == nil {
		signal.Stop(sigs)
		if early != 0 {
			return r.stoppedBeforeClaim(early)
		}
		return code
	}
	r.log.Info("claimed", "owner", r.owner, "attempt", claimed.Attempt)
	// From here on a signal must not kill the wrapper before the outcome is
	// recorded: while the command runs it is relayed (and handled in
	// supervise); after, it is noted and the recording goes on.
	defer r.holdSignals()()
	if early == 0 {
		early = pendingSignal(sigs)
	}
	if sig := early; sig != 0 {
		signal.Stop(sigs)
		code := 128 + int(sig)
		reason := fmt.Sprintf("%s received before the command started; it was not started", signalName(sig))
		r.mu.Lock()
		r.stopReason = reason
		r.mu.Unlock()
		r.log.Warn("not starting the command: stopped by a signal", "signal", signalName(sig))
		return r.finish(&state.Exit{Code: code, Signal: signalName(sig)}, "", reason, code)
	}

	dt, err := r.prepareRetrying(ctx, claimed)
	if err != nil {
		var de *DataError
		if !errors.As(err, &de) {
			err = &DataError{Problems: []string{err.Error()}}
		}
		r.log.Error("command not started: its data could not be prepared", "error", err)
		return r.finish(&state.Exit{Code: state.ExitDataRefused}, "", "command not started: "+err.Error(), state.ExitDataRefused)
	}
	r.data = dt
	defer dt.remove()

	p, err := process.Start(process.Config{
		Args:            dt.argv,
		Env:             dt.env,
		Stdin:           r.cfg.Stdin,
		Stdout:          r.cfg.Stdout,
		Stderr:          stderrWriter(r.cfg.Stderr),
		KillGrace:       r.cfg.KillGrace,
		ForwardSignals:  true,
		KillAfterTerm:   true,
		Signals:         sigs,
		SignalChildOnly: r.cfg.SignalChildOnly,
		Guard:           r.cfg.Guard,
		GuardPipe:       r.cfg.GuardPipe,
		Reap:            r.cfg.Subreaper,
		Logger:          r.log.Named("runner"),
	})
	if err != nil {
		code := process.ExitCode(err)
		r.log.Error("command did not start", "error", err)
		return r.finish(&state.Exit{Code: code}, err.Error(), fmt.Sprintf("command did not start: %v", err), code)
	}
	res := r.supervise(ctx, p, claimed.StartTime)

	exit := &state.Exit{Code: res.ExitStatus()}
	if res.Signal != 0 {
		exit.Signal = signalName(res.Signal)
	}
	code = exit.Code
	r.mu.Lock()
	stopReason, timedOut := r.stopReason, r.timedOut
	r.mu.Unlock()
	if timedOut {
		code = state.ExitTimeout
	}
	reason := describeExit(exit)
	if stopReason != "" {
		reason = stopReason + "; " + reason
	}
	if exit.Code == 0 && stopReason == "" {
		out, err := dt.readOutput()
		if err != nil {
			r.log.Error("the command exited 0, but its output is refused: the activity fails", "error", err)
			r.outputRefused = true
			reason = err.Error() + "; " + reason
			code = state.ExitDataRefused
		}
		r.output = out
	}
	return r.finish(exit, string(res.StderrTail), reason, code)
}

// CatchSignals starts catching the termination signals that the wrapper
// handles (those not ignored when it started) and returns their channel,
// for Config.Signals.
func CatchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 32)
	notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	return sigs
}

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
	uncertain := false // an attempt whose answer was lost may have landed
	host, _ := os.Hostname()
	op := func() error {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		wf, err := r.st.GetWorkflow(actx, r.cfg.Key.WorkflowExecID)
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
			refused = fmt.Errorf("workflow %s is %s, not RUNNING", wf.WorkflowExecID, wf.State)
			return backoff.Permanent(refused)
		}
		claimed, err = r.st.UpdateActivity(actx, r.cfg.Key, state.ActivityChange{
			From: []state.ActivityState{state.Queued, state.Ready, state.Preparing},
			To:   state.Running,
			Claim: &state.Claim{
				Owner: r.owner, Host: host, PID: os.Getpid(),
				HeartbeatEnabled:  r.cfg.Heartbeat,
				HeartbeatInterval: r.cfg.HeartbeatInterval,
				HeartbeatTimeout:  r.cfg.HeartbeatTimeout,
			},
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

// supervise waits for the command, stopping it when the lease is lost, the
// activity is cancelled, --timeout passes, or the wrapper is told to stop.
// Every goroutine it starts ends before it returns.
func (r *run) supervise(ctx context.Context, p *process.Process, since time.Time) process.Result {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		if err := p.Close(); err != nil {
			r.log.Error("closing the command", "error", err)
		}
	}()

	if r.cfg.Heartbeat {
		wake := r.wake
		pump, err := heartbeat.New(r.st, heartbeat.Config{
			Key: r.cfg.Key, Owner: r.owner, Interval: r.cfg.HeartbeatInterval,
			Timeout: r.cfg.HeartbeatTimeout, Since: since, Logger: r.log.Named("heartbeat"),
			Progress: r.progress, Wake: wake.changed,
		})
		if err != nil { // the CLI checks the settings first; this is a defect
			r.stop(p, "heartbeat settings refused: "+err.Error())
		} else {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					err := pump.Run(sctx)
					var lost *heartbeat.LostError
					if !errors.As(err, &lost) {
						return
					}
					switch {
					case lost.State == state.CancelledRunning || !r.cfg.KeepRunningOnLeaseLoss:
						r.log.Warn("lease lost; stopping the command", "reason", lost.Reason)
						r.stop(p, lost.Reason)
						return
					case lost.Expired:
						// The store was unreachable: keep beating, so that a
						// cancellation is still noticed once it is back.
						r.log.Warn("lease lost; letting the command run as asked, and beating on", "reason", lost.Reason)
						pump, _ = heartbeat.New(r.st, heartbeat.Config{
							Key: r.cfg.Key, Owner: r.owner, Interval: r.cfg.HeartbeatInterval,
							Timeout: r.cfg.HeartbeatTimeout, Since: clock.Now(), Logger: r.log.Named("heartbeat"),
							Progress: r.progress, Wake: wake.changed,
						})
					default:
						r.log.Warn("lease lost; letting the command finish as asked", "reason", lost.Reason)
						return
					}
				}
			}()
		}
	}

	if r.cfg.Timeout > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(r.cfg.Timeout)
			defer t.Stop()
			select {
			case <-sctx.Done():
			case <-t.C:
				r.mu.Lock()
				r.timedOut = true
				r.mu.Unlock()
				r.log.Warn("stopping the command: it ran longer than --timeout", "timeout", r.cfg.Timeout)
				r.stop(p, fmt.Sprintf("ran longer than --timeout %s", r.cfg.Timeout))
			}
		}()
	}

	// The runner relays every signal to the command. SIGTERM (docker
	// stop, ECS's StopTask, whimbrel run's Ctrl-C) also arms the kill
	// grace there (process.Config.KillAfterTerm), so that the outcome is
	// recorded before the engine kills the wrapper (the launcher gives
	// containers a stop timeout longer than the grace). SIGINT and the
	// others are only relayed: a command may handle them and carry on, as
	// under tini.
	res, err := p.Wait()
	if err != nil {
		r.log.Error("lost the command's exit status", "error", err)
	}
	return res
}

// holdSignals catches the termination signals until the returned function
// is called, so that their default action cannot cut the final writes short.
func (r *run) holdSignals() (release func()) {
	c := make(chan os.Signal, 4)
	notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sig := range c {
			r.log.Debug("signal held until the outcome is recorded", "signal", sig)
		}
	}()
	return func() {
		signal.Stop(c)
		close(c)
		<-done
	}
}

// notify catches those of sigs that were not ignored when the wrapper
// started: catching a signal would make the command's disposition the
// default one, and an ignored signal must stay ignored in it.
func notify(c chan<- os.Signal, sigs ...syscall.Signal) {
	for _, s := range sigs {
		if !process.Ignored(s) {
			signal.Notify(c, s)
		}
	}
}

// pendingSignal returns the first signal waiting in c, or 0.
func pendingSignal(c chan os.Signal) syscall.Signal {
	select {
	case sig := <-c:
		if s, ok := sig.(syscall.Signal); ok {
			return s
		}
	default:
	}
	return 0
}

// stop asks the runner to stop the command, recording the first reason.
// It does not wait: the command's exit ends supervise.
func (r *run) stop(p *process.Process, reason string) {
	r.mu.Lock()
	if r.stopReason == "" {
		r.stopReason = reason
	}
	r.mu.Unlock()
	p.Terminate(reason)
}

// finish records the outcome with fresh, bounded retries, then advances
// the workflow. It returns code, or state.ExitNotRecorded if nothing could be
// written.
func (r *run) finish(exit *state.Exit, stderrTail, reason string, code int) int {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RecordTimeout)
	defer cancel()
	r.mu.Lock()
	stopped := r.stopReason != ""
	r.mu.Unlock()
	to := state.Failed
	if exit.Code == 0 && !stopped && !r.outputRefused {
		to = state.Completed
	}
	// The last progress the command wrote, which no heartbeat may have
	// carried yet, rides on the final write.
	var progress string
	if r.data != nil {
		var err error
		if progress, err = r.data.readProgress(); err != nil {
			r.log.Warn("progress not recorded", "error", err)
		}
	}
	tail := strings.ToValidUTF8(stderrTail, "\uFFFD")

	var final *state.ActivityExec
	op := func() error {
		ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		a, err := r.st.UpdateActivity(ctx, r.cfg.Key, state.ActivityChange{
			From: []state.ActivityState{state.Running}, To: to, Owner: r.owner,
			Exit: exit, Error: tail, Reason: reason, Output: r.output, Progress: progress,
		})
		var ce *state.ConflictError
		switch {
		case err == nil:
			final = a
			return nil
		case errors.As(err, &ce) && ce.Owner == r.owner && ce.State == string(to):
			// An earlier attempt whose answer was lost did land.
			final, err = r.st.GetActivity(ctx, r.cfg.Key)
			return err
		case errors.As(err, &ce) && ce.Owner == r.owner &&
			(ce.State == string(state.CancelledRunning) || ce.State == string(state.TimedOut)):
			// The state is final; record how the command ended beside it.
			final, err = r.st.UpdateActivity(ctx, r.cfg.Key, state.ActivityChange{
				From: []state.ActivityState{state.ActivityState(ce.State)}, Owner: r.owner,
				Exit: exit, Error: tail, Reason: reason,
			})
			if errors.Is(err, state.ErrConflict) {
				return backoff.Permanent(err)
			}
			return err
		case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return backoff.Permanent(err)
		}
		r.log.Warn("recording the outcome failed; retrying", "error", err)
		return err
	}
	b := retryPolicy(200 * time.Millisecond)
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		var ce *state.ConflictError
		if errors.As(err, &ce) {
			// Someone else holds the activity now; its record is theirs.
			r.log.Error("outcome not recorded: the activity is no longer ours", "error", err,
				"exit_code", exit.Code, "reason", reason)
			return code
		}
		why := "the store stayed unreachable"
		switch {
		case errors.Is(err, state.ErrNotFound):
			why = "the activity item is gone"
		case errors.Is(err, state.ErrInvalidItem):
			why = "the activity item is malformed"
		}
		r.log.Error("OUTCOME NOT RECORDED: "+why, "error", err,
			"state", to, "exit_code", exit.Code, "signal", exit.Signal, "reason", reason, "stderr_tail", tail)
		return state.ExitNotRecorded
	}
	r.log.Info("recorded", "state", final.State, "exit_code", exit.Code, "reason", reason)
	fault.Point(fault.AfterFinish)
	readied, err := r.st.Recorded(ctx, final, r.wf, r.log.Named("advance"))
	if err != nil {
		// The outcome is recorded; the monitor finishes the advance.
		r.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
	if readied && r.cfg.Nudge != "" {
		if err := nudge.Send(r.cfg.Nudge); err != nil {
			r.log.Debug("nudging the launcher failed; it will poll", "error", err)
		}
	}
	return code
}

func describeExit(e *state.Exit) string {
	if e.Signal != "" {
		return fmt.Sprintf("killed by %s (exit status %d)", e.Signal, e.Code)
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func signalName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", int(s))
}

// stderrWriter avoids handing the runner a typed nil, which it would take
// for a writer.
func stderrWriter(f *os.File) io.Writer {
	if f == nil {
		return nil
	}
	return f
}
