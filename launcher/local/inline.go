package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/wrapper"
)

// How a local activity is supervised (Backend.Supervise).
const (
	// SuperviseProcess starts whimbrel-run -- COMMAND for each activity.
	SuperviseProcess = "process"
	// SuperviseInline supervises each activity on a goroutine of the
	// launcher's own process (wrapper.Run, with the launcher's open
	// store), and starts only the activity's command: no wrapper process
	// starts, sets up a store client and exits per activity.
	SuperviseInline = "inline"
)

// CheckSupervise checks a --supervise flag.
func CheckSupervise(mode string) error {
	switch mode {
	case "", SuperviseProcess, SuperviseInline:
		return nil
	}
	return fmt.Errorf("--supervise %q is not a mode: give inline (the launcher supervises its local activities itself) or process (a whimbrel-run process each)", mode)
}

// inlineRun is one activity supervised on a goroutine of the backend.
type inlineRun struct {
	job launcher.Job
	// sigs carries to the run what whimbrel-run would have received as a
	// signal (Backend.Signal).
	sigs chan os.Signal
}

// inline reports whether j is supervised inline. An activity that asks
// for the Simple Lambda API (WHIMBREL_API=simple) has its reports go
// through events a processor applies, which only whimbrel-run does: it
// gets a wrapper process.
func (b *Backend) inline(j launcher.Job) bool {
	return b.Supervise == SuperviseInline && b.Store != nil && (j.Env["WHIMBREL_API"] == "" || j.Env["WHIMBREL_API"] == "full")
}

// sharedGuard is the guard process of every command supervised inline,
// started with the first.
func (b *Backend) sharedGuard() (*process.GroupGuard, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.guardProc != nil {
		return b.guardProc, nil
	}
	g, err := process.StartGroupGuard(b.Logger)
	if err != nil {
		return nil, err
	}
	b.guardProc = g
	return g, nil
}

// launchInline supervises j on a goroutine of the backend: it claims the
// activity, runs its command as a child process in its own process group
// with its output in the activity's log, heartbeats, records the outcome
// and advances the workflow, all as whimbrel-run does (package wrapper).
func (b *Backend) launchInline(ctx context.Context, j launcher.Job) (string, error) {
	g, err := b.sharedGuard()
	if err != nil {
		return "", fmt.Errorf("guard the commands supervised inline: %w", err)
	}
	out, err := b.inlineOutput(j)
	if err != nil {
		return "", err
	}
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		out.Close()
		return "", fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	env := b.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(append([]string(nil), env...), j.Environ()...)
	cfg, err := inlineConfig(j, env)
	if err != nil {
		out.Close()
		stdin.Close()
		return "", err
	}
	r := &inlineRun{job: j, sigs: make(chan os.Signal, 8)}
	as := "inline:" + strconv.Itoa(os.Getpid())
	cfg.Signals, cfg.LaunchedAs = r.sigs, as
	if j.Workflow != nil {
		wf := *j.Workflow // the run's own copy
		cfg.Workflow = &wf
	}
	cfg.SharedGuard = g
	// claimed carries the decision on a claim from READY to Launch: nil
	// when it landed, else why not.
	var claimed chan error
	if j.FromReady {
		// The launcher made no claim: the run claims the activity from
		// READY, and Launch returns once that claim is decided.
		claimed = make(chan error, 1)
		cfg.FromReady = true
	}
	tracked := b.handoff != nil // its advance goes through handingReporter
	var landed atomic.Bool
	cfg.Claimed = func(ok bool) {
		landed.Store(ok)
		if ok && tracked {
			b.live.claimed(j.Key) // live.go
		}
		if ok && claimed != nil {
			claimed <- nil
		}
	}
	cfg.Watcher, _ = b.Store.(wrapper.Watcher)
	cfg.Stdin, cfg.Stdout, cfg.Stderr = stdin, out, out
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "whimbrel-run", Output: out,
		Level: hclog.LevelFromString(lookup(env, "WHIMBREL_LOG_LEVEL", "info")), JSONFormat: lookup(env, "WHIMBREL_LOG_FORMAT", "") == "json"})
	b.mu.Lock()
	if b.quitting { // Quit came while the run was prepared: nothing starts
		b.mu.Unlock()
		stdin.Close()
		if out != os.Stderr {
			out.Close()
		}
		return "", quittingError(j)
	}
	if b.inlineRuns == nil {
		b.inlineRuns = map[*inlineRun]struct{}{}
	}
	b.inlineRuns[r] = struct{}{}
	b.wg.Add(1) // under mu, which Quit takes before it waits
	b.inlineWG.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		defer b.inlineWG.Done()
		// The run's own context: a launch's deadline or the launcher's
		// stop must not cut its final writes short. It is stopped as
		// whimbrel-run is, by a signal (Backend.Signal).
		code := wrapper.Run(context.Background(), b.reporter(), cfg)
		// A run whose claim did not land ran nothing: another run of the
		// same activity may be live, whose key it must not take off the
		// live list, and it held no slot of the launcher's to free.
		ran := landed.Load()
		if tracked && ran {
			b.runEnded(j.Key, cfg.Logger)
		}
		if claimed != nil && !ran {
			claimed <- notClaimed(code)
		}
		stdin.Close()
		if out != os.Stderr {
			out.Close()
		}
		b.mu.Lock()
		delete(b.inlineRuns, r)
		b.mu.Unlock()
		var exit error
		if code != 0 {
			exit = fmt.Errorf("exit status %d", code)
		}
		if b.Logger != nil {
			b.Logger.Debug("activity supervised inline ended", "activity_exec_id", j.Key.ActivityExecID, "status", code)
		}
		// Launch told the launcher of a claim from READY that did not
		// land: there is no exit to tell it of (a launch it made its own
		// claim for is, as whimbrel-run's exit is).
		if b.Exited != nil && (claimed == nil || ran) {
			b.Exited(j, exit)
		}
	}()
	if claimed == nil {
		return as, nil
	}
	select {
	case err := <-claimed:
		if err != nil {
			return "", err
		}
		return as, nil
	case <-ctx.Done():
		// The claim is still in flight; whatever it decides, the run
		// records it.
		return "", fmt.Errorf("%w within the launch's deadline: %w", launcher.ErrNotClaimed, ctx.Err())
	}
}

// notClaimed is what Launch returns for a run whose claim from READY did
// not land and that ended with code: ErrNotClaimed, and
// state.ErrUnavailable with it when the store could not be used, so that
// the launcher's pass stops handing out launches that would wait for the
// store the same.
func notClaimed(code int) error {
	if code == state.ExitWrapperError {
		return fmt.Errorf("%w: the store could not be used: %w", launcher.ErrNotClaimed, state.ErrUnavailable)
	}
	return launcher.ErrNotClaimed
}

// inlineOutput opens the activity's log, or is the launcher's stderr
// without a log folder.
func (b *Backend) inlineOutput(j launcher.Job) (*os.File, error) {
	if b.LogDir == "" {
		return os.Stderr, nil
	}
	dir := b.LogDir
	if b.ByWorkflow {
		dir = filepath.Join(dir, LogFolder(j.Key.WorkflowExecID))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create the activity's log folder: %w", err)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, j.Key.ActivityExecID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the activity's log: %w", err)
	}
	return f, nil
}

// inlineConfig is the wrapper.Config whimbrel-run would build from the
// environment the local backend hands it (its defaults, and what the
// activity's settings and env set).
func inlineConfig(j launcher.Job, env []string) (wrapper.Config, error) {
	cfg := wrapper.Config{Key: j.Key, Command: j.Command, Heartbeat: true, Inline: true, Environ: env,
		DataDir: lookup(env, "WHIMBREL_DATA_DIR", "")}
	for name, d := range map[string]*time.Duration{
		state.EnvHeartbeatInterval: &cfg.HeartbeatInterval, state.EnvHeartbeatTimeout: &cfg.HeartbeatTimeout,
		state.EnvTimeout: &cfg.Timeout, state.EnvKillGrace: &cfg.KillGrace,
	} {
		v := lookup(env, name, "")
		if v == "" {
			continue
		}
		p, err := time.ParseDuration(v)
		if err != nil || p < 0 {
			return cfg, fmt.Errorf("%s=%q is not a duration such as 30s", name, v)
		}
		*d = p
	}
	if v := lookup(env, "WHIMBREL_SIGNAL_CHILD_ONLY", ""); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("WHIMBREL_SIGNAL_CHILD_ONLY=%q is not true or false", v)
		}
		cfg.SignalChildOnly = b
	}
	return cfg, nil
}

// lookup is the last value of key in env, or def.
func lookup(env []string, key, def string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(key) && env[i][len(key)] == '=' && env[i][:len(key)] == key {
			return env[i][len(key)+1:]
		}
	}
	return def
}

// signalInline hands sig to every run supervised inline, as whimbrel-run
// would receive it: SIGTERM is relayed to the command and arms its kill
// grace, a second SIGTERM or SIGKILL kills the command at once, and the
// outcome is recorded.
func (b *Backend) signalInline(sig syscall.Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for r := range b.inlineRuns {
		select {
		case r.sigs <- sig:
		default: // full of signals already: the command is being stopped
		}
	}
}

// Stop stops the activities supervised inline, which do not outlive the
// launcher's process: each gets SIGTERM (its command is stopped and its
// outcome recorded), and those still running after within are killed.
// It waits for them all, then releases the shared guard process. Nothing
// is done to wrapper processes, which outlive the launcher.
func (b *Backend) Stop(within time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.inlineWG.Wait()
	}()
	b.signalInline(syscall.SIGTERM)
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		b.signalInline(syscall.SIGKILL)
		<-done
	}
	b.closeGuard()
}

// WaitInline waits for the activities supervised inline to end on their
// own, then releases the shared guard process.
func (b *Backend) WaitInline() {
	b.inlineWG.Wait()
	b.closeGuard()
}

func (b *Backend) closeGuard() {
	b.mu.Lock()
	g := b.guardProc
	b.guardProc = nil
	b.mu.Unlock()
	if g != nil {
		if err := g.Close(); err != nil && !errors.Is(err, os.ErrClosed) && b.Logger != nil {
			b.Logger.Debug("closing the group guard", "error", err)
		}
	}
}
