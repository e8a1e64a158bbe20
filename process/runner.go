//go:build linux

// Package process supervises the command that whimbrel-run wraps. It starts
// the command in its own process group with the wrapper's stdin and stdout,
// passes stderr through while keeping its tail for the run record, relays
// signals to the group, stops it with SIGTERM then SIGKILL, reaps orphaned
// descendants when the wrapper is PID 1 or a subreaper, can guard against the
// wrapper's own sudden death (see guard.go), and reports how the command
// ended in the shell's exit status convention.
//
// The package is Linux only: reaping relies on PR_SET_CHILD_SUBREAPER and on
// the wait semantics of Linux.
package process

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/state"
)

// Defaults for the zero values of Config.
const (
	// DefaultStderrTailSize is how many trailing bytes of stderr are kept.
	DefaultStderrTailSize = 4096
	// DefaultDrainTimeout bounds how long Wait keeps copying stderr after
	// the child exits. Descendants that inherited stderr can hold the pipe
	// open indefinitely, so the copy cannot simply run to end of file; it
	// ends once the pipe has been quiet for drainIdle, or at this bound
	// while a descendant keeps writing.
	DefaultDrainTimeout = 2 * time.Second
)

// Internal timings, named so their purpose is plain.
const (
	// killWait bounds how long Stop waits after SIGKILL. A killed process
	// only survives this long when it is stuck in uninterruptible sleep.
	killWait = 5 * time.Second
	// reapInterval is the fallback reaping tick. SIGCHLD is the real
	// trigger, but a periodic pass guarantees that no zombie lingers even if
	// a notification is ever missed.
	reapInterval = time.Second
	// drainIdle ends the stderr drain after the child's exit once the pipe
	// has been quiet this long: what the child wrote before it exited is
	// already in the pipe, so only a descendant still writing needs more.
	drainIdle = 50 * time.Millisecond
	// signalBuffer sizes the forwarding channel so that a burst of signals,
	// including those arriving before the forwarder runs, is not dropped.
	signalBuffer = 32
)

// Config describes the command to run and how to supervise it.
type Config struct {
	// Args is the command and its arguments. A name without a slash is
	// looked up in the wrapper's PATH, as exec.Command does.
	Args []string
	// Env is the child's environment; nil inherits the wrapper's.
	Env []string
	// Dir is the child's working directory; empty means the wrapper's.
	Dir string

	// Stdin and Stdout are handed to the child as they are, without any
	// copying; nil means the wrapper's own os.Stdin and os.Stdout.
	Stdin, Stdout *os.File
	// Stderr receives the child's stderr unchanged; nil means os.Stderr.
	Stderr io.Writer
	// StderrTailSize is how many trailing bytes of stderr Result keeps;
	// zero or less means DefaultStderrTailSize.
	StderrTailSize int
	// DrainTimeout bounds stderr copying after the child exits; zero or
	// less means DefaultDrainTimeout.
	DrainTimeout time.Duration

	// KillGrace is how long Stop waits between SIGTERM and SIGKILL; zero or
	// less means state.DefaultKillGrace.
	KillGrace time.Duration
	// KillAfterTerm, with ForwardSignals, makes a relayed SIGTERM (docker
	// stop, ECS's StopTask) arm the kill grace: if the child outlives it,
	// its process group is killed, so that its end is known before
	// whoever sent the SIGTERM kills the wrapper. A second SIGTERM kills
	// it at once (someone means it). The child is not marked Stopped: the
	// signal's sender, not the runner, decided it should end.
	KillAfterTerm bool

	// ForwardSignals relays every signal the wrapper receives to the
	// child's process group until Close, except SIGCHLD, SIGURG, SIGPIPE,
	// SIGPROF, SIGTTIN and SIGTTOU, which concern the wrapper itself. The
	// wrapper then no longer dies of SIGTERM or SIGINT; it outlives the
	// child and can report its status. Signals that were ignored when the
	// process started (see Ignored) are neither caught nor relayed, so the
	// child inherits them ignored; signals blocked at start stay blocked in
	// the child.
	ForwardSignals bool
	// Signals, when set with ForwardSignals, is the channel the forwarder
	// reads: a caller that must catch termination signals before Start
	// (while it prepares) passes the channel it has been notifying, so
	// that a signal caught before the fork is relayed once the child runs,
	// and none is relayed twice. Start adds every other catchable signal
	// to it; the forwarder stops it at Close.
	Signals chan os.Signal
	// SignalChildOnly relays signals to the child alone instead of its
	// whole process group (tini's default; the group is tini -g). Stop
	// always signals the whole group.
	SignalChildOnly bool

	// Guard makes sure the child's process group does not outlive the
	// wrapper: if the wrapper dies without Close (kill -9), a guard process
	// sends the group SIGTERM, then SIGKILL after KillGrace. It costs one
	// small process per Process; see guard.go. It is not needed when the
	// wrapper is PID 1, whose death ends every process in its namespace.
	Guard bool
	// GuardPipe, with Guard, is the write end of a guard pipe whose read
	// end a supervisor watches (Watch): the supervisor is the guard, and
	// no guard process is started unless the supervisor goes away first.
	// The Process owns it from Start on; it must be close-on-exec.
	GuardPipe *os.File

	// SharedGuard, instead of Guard, is a guard shared by the many commands
	// a long-lived supervisor runs in its own process (GroupGuard): Start
	// names the command's process group to it right after the fork, and
	// Close releases it once the command has been reaped.
	SharedGuard SharedGuard
	// CallerSignals, with ForwardSignals, relays only what the caller
	// sends on Signals: none of the process's own signals is caught. A
	// supervisor that runs many commands in one process relays to each
	// what is meant for it; nor is it warned that orphans go unreaped, as
	// it is not the commands' wrapper process.
	CallerSignals bool

	// Reap makes the wrapper a child subreaper and reaps every descendant
	// that is reparented to it, until Close. Reaping is also on whenever the
	// wrapper is PID 1. While it is on the runner waits for any child of
	// the process, so nothing else in the process may start and wait for
	// children of its own, and at most one Process may be running.
	Reap bool

	// Logger receives diagnostics; nil discards them.
	Logger hclog.Logger
}

// SharedGuard is a guard of many commands' process groups (GroupGuard).
type SharedGuard interface {
	Watch(pgid int, grace time.Duration) error
	Release(pgid int)
}

// Process is a running child. All its methods are safe for concurrent use.
// Close must be called to release the goroutines and signal handlers it owns.
type Process struct {
	pid       int
	grace     time.Duration
	drain     time.Duration
	log       hclog.Logger
	stderr    *os.File // read end of the stderr pipe, owned by pump; nil when stderr is the terminal
	stderrOut io.Writer
	tail      *tail
	childOnly bool     // relay signals to the child, not its group
	termKill  bool     // Config.KillAfterTerm
	tty       *os.File // the terminal whose foreground group the child got, or nil
	guard     *guard   // nil without Config.Guard
	shared    SharedGuard
	exitTime  time.Time

	// mu serialises signalling against reaping. Once the child is reaped its
	// ID can be reused, so a signal must never be sent after that point;
	// holding mu across both the kill and the reap guarantees it.
	mu         sync.Mutex
	reaped     bool
	status     unix.WaitStatus
	waitErr    error
	stopped    bool
	stopReason string

	// polls counts the polls for the child's exit (collectChild), so
	// that a test can tell its waiter is not woken by other exits.
	polls atomic.Int64

	exited chan struct{} // closed once the child is reaped
	done   chan struct{} // closed once result is final
	result Result

	stopOnce  sync.Once
	stopErr   error
	closeOnce sync.Once
	closeErr  error
	closing   bool // set under mu once Close waits for bg: no goroutine may join it

	// bg tracks every goroutine the Process starts (waiter or reaper,
	// stderr pump, forwarder, guard waiter, asynchronous stops), so that
	// Close can wait for them all; quit tells those that outlive the
	// child to end.
	quit chan struct{}
	bg   sync.WaitGroup
}

// Start starts the command described by cfg. Errors that stop the command
// from running are *StartError; any other error is a wrapper failure. Use
// ExitCode to turn either into an exit status.
func Start(cfg Config) (_ *Process, err error) {
	// The Process owns the guard pipe: a Start that fails before a guard
	// took it closes it, so that the supervisor's guard returns.
	guardPipe := cfg.GuardPipe
	defer func() {
		if err != nil && guardPipe != nil {
			_ = guardPipe.Close()
		}
	}()
	if len(cfg.Args) == 0 {
		return nil, fmt.Errorf("start: %w", ErrNoCommand)
	}
	path := cfg.Args[0]
	// Names with a slash are left to execve, so that a relative path is
	// resolved against Dir and its errors classify the failure.
	if !strings.Contains(path, "/") {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, startError(path, err)
		}
		path = lp
	}
	// A missing Dir would otherwise surface from exec as ENOENT and be
	// mistaken for a missing command.
	if cfg.Dir != "" {
		if _, err := os.Stat(cfg.Dir); err != nil {
			return nil, fmt.Errorf("check working directory: %w", err)
		}
	}

	reaping := cfg.Reap || os.Getpid() == 1
	p := &Process{
		grace:     orDefault(cfg.KillGrace, state.DefaultKillGrace),
		drain:     orDefault(cfg.DrainTimeout, DefaultDrainTimeout),
		log:       cfg.Logger,
		stderrOut: cfg.Stderr,
		tail:      newTail(orDefault(cfg.StderrTailSize, DefaultStderrTailSize)),
		exited:    make(chan struct{}),
		done:      make(chan struct{}),
		quit:      make(chan struct{}),
	}
	if p.log == nil {
		p.log = hclog.NewNullLogger()
	}
	if p.stderrOut == nil {
		p.stderrOut = os.Stderr
	}
	stdin, stdout := cfg.Stdin, cfg.Stdout
	if stdin == nil {
		stdin = os.Stdin
	}
	if stdout == nil {
		stdout = os.Stdout
	}

	p.childOnly = cfg.SignalChildOnly
	p.termKill = cfg.KillAfterTerm

	if cfg.Reap {
		// Orphaned descendants are reparented to the nearest subreaper, so
		// this is what lets a wrapper that is not PID 1 reap them.
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return nil, fmt.Errorf("become child subreaper: %w", err)
		}
	}
	if !reaping && !cfg.CallerSignals {
		p.log.Warn("not PID 1 and not a subreaper: orphaned descendants of the command will not be reaped here (use --subreaper)")
	}

	// stderr goes through a pipe so that its tail can be kept, except when
	// it is a terminal: then the child gets the terminal itself, as it gets
	// stdin and stdout, so that it sees a terminal and its stdout and
	// stderr lines stay in order. The tail is then not captured.
	var childStderr *os.File
	if f, ok := p.stderrOut.(*os.File); ok && isTerminal(f) {
		childStderr = f
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("create stderr pipe: %w", err)
		}
		p.stderr, childStderr = r, w
		defer w.Close() // The child has its copy; ours would keep the pipe from EOF.
	}

	// Signals are caught before the fork, because a SIGTERM landing between
	// the fork and the forwarder would otherwise kill the wrapper and leave
	// the child unsupervised. Signals caught early wait in the buffer.
	var sigs chan os.Signal
	if cfg.ForwardSignals {
		sigs = cfg.Signals
		if sigs == nil {
			sigs = make(chan os.Signal, signalBuffer)
		}
		if !cfg.CallerSignals {
			signal.Notify(sigs, catchable()...)
		}
	}

	// The child gets its own process group. When the wrapper's group owns
	// the terminal on stdin (docker run -it, a shell's foreground job), the
	// child's group is made the terminal's foreground group, so that an
	// interactive command can read it instead of stopping on SIGTTIN.
	sys := &syscall.SysProcAttr{Setpgid: true}
	if isTerminal(stdin) {
		if fg, err := unix.IoctlGetInt(int(stdin.Fd()), unix.TIOCGPGRP); err == nil && fg == unix.Getpgrp() {
			sys.Foreground, sys.Ctty = true, int(stdin.Fd())
			p.tty = stdin
		}
	}

	// The guard comes up before the command, so that no moment after the
	// command's start finds the wrapper unguarded (but for the fork to the
	// write of the process group, see guard.go).
	var g *guard
	switch {
	case cfg.Guard && os.Getpid() != 1 && cfg.GuardPipe != nil:
		g = supervisedGuard(cfg.GuardPipe, p.grace, reaping, p.log)
		guardPipe = nil // the guard's now (closed if it could not be used)
	case cfg.Guard && os.Getpid() != 1:
		var err error
		if g, err = startGuard(p.grace, reaping, p.log); err != nil {
			// Only the protection against the wrapper's own sudden death
			// is missing: the command is started all the same.
			p.log.Warn("the command will not be stopped if this wrapper is killed", "error", err)
			g = nil
		}
	case cfg.GuardPipe != nil:
		_ = cfg.GuardPipe.Close() // as PID 1 (or unguarded) the supervisor is not needed
		guardPipe = nil
	}

	// os.StartProcess rather than exec.Cmd: every stdio is an *os.File, and
	// the runner does its own waiting, so exec.Cmd would add nothing but
	// bookkeeping that expects its own Wait to be called.
	proc, err := os.StartProcess(path, cfg.Args, &os.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []*os.File{stdin, stdout, childStderr},
		Sys:   sys,
	})
	if err != nil {
		if g != nil {
			g.abort() // end of file before a process group: the guard returns
		}
		p.tty = nil
		if p.stderr != nil {
			p.stderr.Close()
		}
		if sigs != nil {
			signal.Stop(sigs)
		}
		return nil, startError(path, err)
	}
	p.pid = proc.Pid
	// The runner waits with raw wait calls, so the os.Process handle (and
	// the pidfd it may hold) is not needed.
	_ = proc.Release()
	p.log.Debug("started child", "pid", p.pid, "path", path, "reaping", reaping, "foreground", sys.Foreground)

	if g != nil {
		// Right after the fork: until this write lands, a wrapper killed
		// outright leaves the command unguarded.
		if err := g.watch(p.pid); err != nil {
			p.log.Warn("the command will not be stopped if this wrapper is killed", "error", err)
		} else {
			p.log.Debug("guarded: the command's process group is stopped if this wrapper is killed", "process_group", p.pid)
		}
		p.guard = g
	}
	if cfg.SharedGuard != nil {
		if err := cfg.SharedGuard.Watch(p.pid, p.grace); err != nil {
			p.log.Warn("the command will not be stopped if its supervisor is killed", "error", err)
		} else {
			p.log.Debug("guarded: the command's process group is stopped if its supervisor is killed", "process_group", p.pid)
			p.shared = cfg.SharedGuard
		}
	}
	// Tests die here: the command has started, nothing else has.
	fault.Point(fault.AfterCommandStart)

	p.bg.Add(2)
	go p.pump()
	if reaping {
		go p.reap()
	} else {
		go p.waitChild(openPidfd(p.pid))
	}
	if sigs != nil {
		p.bg.Add(1)
		go p.forward(sigs)
	}
	return p, nil
}

// Pid returns the child's process ID, which is also its process group ID.
func (p *Process) Pid() int { return p.pid }

// Done is closed once the child has exited and Wait's Result is final.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the child has exited and its stderr has been drained.
// The error is ErrLostChild when the status could not be collected, or
// ErrStopTimeout when Close gave up on a child that survived SIGKILL; the
// Result then reports ExitWrapperError.
func (p *Process) Wait() (Result, error) {
	<-p.done
	return p.result, p.waitErr
}

// StderrTail returns a copy of the stderr tail captured so far.
func (p *Process) StderrTail() []byte { return p.tail.bytes() }

// Signal sends sig to the child's whole process group. It returns ErrExited
// once the child has been reaped.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalLocked(sig)
}

func (p *Process) signalLocked(sig syscall.Signal) error {
	return p.signalTargetLocked(-p.pid, sig)
}

// signalTargetLocked signals the group (-pid) or the child alone (pid).
func (p *Process) signalTargetLocked(target int, sig syscall.Signal) error {
	if p.reaped {
		return fmt.Errorf("signal %v: %w", sig, ErrExited)
	}
	if err := unix.Kill(target, sig); err != nil {
		return fmt.Errorf("signal process group %d with %v: %w", p.pid, sig, err)
	}
	return nil
}

// Stop ends the child: SIGTERM to its process group, then SIGKILL if it is
// still running after KillGrace. It returns once the child has exited, or
// with ErrStopTimeout if it survives SIGKILL for a few seconds. Only the first
// call (of Stop and Terminate) acts and records reason; later and
// concurrent calls wait for it and return its result. Stop after the child
// has exited does nothing.
//
// The Process is the one owner of stopping its child (signal, grace, kill,
// reap): callers say why, never how.
func (p *Process) Stop(reason string) error {
	p.term(reason)
	p.stopOnce.Do(func() { p.stopErr = p.escalate() })
	return p.stopErr
}

// Terminate is Stop without the wait: it sends SIGTERM and returns, and the
// child's exit shows in Done and Wait. The grace and SIGKILL run on a
// goroutine of the Process, which Close waits for. Terminate after Close
// does nothing.
func (p *Process) Terminate(reason string) {
	p.term(reason)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return
	}
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		_ = p.Stop(reason)
	}()
}

// term records reason and sends SIGTERM to the child's group, the first
// time it is called while the child runs.
func (p *Process) term(reason string) {
	p.mu.Lock()
	if p.reaped || p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped, p.stopReason = true, reason
	err := p.signalLocked(unix.SIGTERM)
	p.mu.Unlock()
	p.log.Info("stopping child", "pid", p.pid, "reason", reason, "grace", p.grace)
	if err != nil {
		// The group may already be gone with only the zombie leader left;
		// the wait in escalate settles it either way.
		p.log.Debug("SIGTERM failed", "error", err)
	}
}

// escalate waits the grace for the child that term signalled, then kills
// it.
func (p *Process) escalate() error {
	if waitFor(p.exited, p.grace) {
		return nil
	}
	p.log.Warn("child outlived grace period, killing", "pid", p.pid)
	p.kill()
	if waitFor(p.exited, killWait) {
		return nil
	}
	return fmt.Errorf("stop child %d: %w", p.pid, ErrStopTimeout)
}

// Close stops the child if it is still running, waits for its Result, and
// then ends signal forwarding and reaping; when it returns, every goroutine
// of the Process has ended. Descendants orphaned after Close are no longer
// reaped. Close is idempotent. If the child survives SIGKILL, Close returns
// ErrStopTimeout, and Wait reports it: the child is given up on, and
// nothing will reap it any more.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		p.closeErr = p.Stop("runner closed")
		if p.closeErr == nil {
			<-p.done // Bounded: the child has exited and draining is timed.
		}
		if p.guard != nil {
			p.guard.release()
		}
		if p.shared != nil && p.closeErr == nil {
			p.shared.Release(p.pid)
		}
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		close(p.quit)
		p.bg.Wait()
	})
	return p.closeErr
}

// kill sends SIGKILL to the child's process group, unless it has been
// reaped.
func (p *Process) kill() {
	if err := p.Signal(unix.SIGKILL); err != nil {
		p.log.Debug("SIGKILL failed", "error", err)
	}
}

// waitFor reports whether ch closed within d.
func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// takeTerminalBack makes the wrapper's process group the terminal's
// foreground group again once the child has exited, so that the wrapper's
// last log lines cannot stop it (TOSTOP) and a shell finds things as it
// left them. SIGTTOU is blocked on this thread meanwhile: a background
// group may then change the foreground group.
func takeTerminalBack(tty *os.File) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set, old unix.Sigset_t
	set.Val[(unix.SIGTTOU-1)/64] |= 1 << ((uint(unix.SIGTTOU) - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, &old); err != nil {
		return
	}
	_ = unix.IoctlSetPointerInt(int(tty.Fd()), unix.TIOCSPGRP, unix.Getpgrp())
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
