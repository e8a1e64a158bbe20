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
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

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

	// Inline runs the activity inside a long-lived process that runs many
	// at once (a launcher's --supervise inline) rather than in a wrapper
	// process of its own: nothing process-wide is touched. No signal of
	// the process is caught (the supervisor sends each run what is meant
	// for it on Signals), the garbage collector is left as it is, and the
	// command's guard is SharedGuard.
	Inline bool
	// Environ, when set, is the environment the command inherits from
	// (filtered as the wrapper's own is); nil means the process's.
	Environ []string
	// SharedGuard, when set, guards the command's process group instead
	// of Guard (see process.GroupGuard).
	SharedGuard process.SharedGuard
	// Readied, when set, is called once this activity's outcome readied
	// dependents: an inline supervisor's launcher wakes at once.
	Readied func()
	// Workflow, when set, is the workflow's item as an inline supervisor
	// read it before the launch: the claim's first attempt takes its
	// definition and parameters from it and reads the workflow's state
	// alone (claimWorkflow).
	Workflow *state.WorkflowExec
	// LaunchedAs, when set, is recorded by the claim's write (launched_as):
	// an inline supervisor knows its launch before the claim, and saves
	// the write that would record it after.
	LaunchedAs string
	// FromReady, set by an inline supervisor whose launcher made no claim
	// of its own, makes the claim move the activity from READY only (a
	// claim from QUEUED would take another launcher's launch); a wrapper
	// stopped before it then records nothing, leaving the activity READY
	// for the next launcher.
	FromReady bool
	// Claimed, when set, is called once the claim is decided, with
	// whether it landed, before the command starts.
	Claimed func(landed bool)

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
	skipped         bool   // an element whose when is false: recorded skipped, not run
	progressProblem string // the last problem with the progress file, logged once
}

func (r *run) run(ctx context.Context) int {
	if r.cfg.ParentDeathSignal != 0 && !r.cfg.Inline { // a supervisor's parent is not the run's
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
	switch {
	case sigs == nil && r.cfg.Inline:
		sigs = make(chan os.Signal, 1) // nothing is relayed
	case sigs == nil:
		sigs = CatchSignals()
	}
	// The watch starts before the claim, so that a cancellation that lands
	// at any time after it is heard: its wake waits in the channel.
	if r.cfg.Heartbeat {
		r.wake = r.watch()
		defer r.wake.stop()
	}
	claimed, code, early := r.claim(ctx, sigs)
	if r.cfg.Claimed != nil {
		r.cfg.Claimed(claimed != nil)
	}
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

	dt, since, err := r.prepareBeating(ctx, claimed) // prepare.go
	if sk := new(*elementSkipped); errors.As(err, sk) {
		r.skipped = true
		r.log.Info("not starting the command: the element is skipped", "reason", (*sk).reason)
		return r.finish(&state.Exit{}, "", (*sk).reason, 0)
	}
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
		Guard:           r.cfg.Guard && r.cfg.SharedGuard == nil,
		GuardPipe:       r.cfg.GuardPipe,
		SharedGuard:     r.cfg.SharedGuard,
		CallerSignals:   r.cfg.Inline,
		Reap:            r.cfg.Subreaper && !r.cfg.Inline,
		Logger:          r.log.Named("runner"),
	})
	if err != nil {
		code := process.ExitCode(err)
		r.log.Error("command did not start", "error", err)
		return r.finish(&state.Exit{Code: code}, err.Error(), fmt.Sprintf("command did not start: %v", err), code)
	}
	res := r.supervise(ctx, p, since)

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
