//go:build linux

package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// The guard makes sure the command never outlives its wrapper. A wrapper
// killed with SIGKILL cannot stop anything, and the kernel's parent-death
// signal (PR_SET_PDEATHSIG) would reach the command alone, not the
// descendants in its process group, and would fire when the thread that
// forked it ends rather than the process. So the wrapper keeps the write end
// of a pipe whose read end a guard holds (close-on-exec, so the command has
// none), and Watch is the guard's side of it.
//
// The guard is one of two things. By default Start runs a small guard
// process: this same executable, re-run through /proc/self/exe with guardEnv
// set, whose main turns into the guard by calling GuardMain first thing (as
// moby's reexec.Init). A supervisor that outlives its wrappers (whimbrel-launcher,
// whimbrel run) can be the guard instead and save that process per command:
// it hands the wrapper the pipe's write end (Config.GuardPipe) and runs
// Watch on the read end. Should the supervisor go away first, the wrapper
// sees the pipe broken and starts a guard process of its own, so the
// command stays guarded.
//
// The protocol: the wrapper names the command's process group and the kill
// grace in one line ("PGID GRACE\n") as soon as the fork returns, so that
// the wrapper's death right after the command starts still finds the guard
// up. When the wrapper closes normally it then writes a byte: the guard
// returns quietly. When the wrapper dies, the kernel closes the write end and
// the guard reads end of file: it sends SIGTERM to the command's process
// group, then SIGKILL after the kill grace. End of file before the line
// means the command never started (or the wrapper died between the fork and
// the write: the one window left, a few microseconds in which the command
// execs and the wrapper writes a few bytes); the guard returns quietly.
const guardEnv = "WHIMBREL_RUNNER_GUARD"

// guardPoll is how often the guard checks whether the group is gone during
// the grace.
const guardPoll = 50 * time.Millisecond

// GuardMain runs the guard process when Start re-ran this executable as
// one, and returns the exit code for main to exit with and true; it returns
// false at once in any other process. Every program that calls Start (the
// wrapper, whimbrel-run) must call it first thing in main, before it does
// anything else, and so must the TestMain of a test binary whose tests call
// Start: the guard process is that same binary. A program that only
// watches guard pipes (process.Watch) needs no call.
//
//	func main() {
//		if code, ok := process.GuardMain(); ok {
//			os.Exit(code)
//		}
//		…
//	}
func GuardMain() (code int, ok bool) {
	if _, ok := os.LookupEnv(guardEnv); !ok {
		return 0, false
	}
	return guardMain(), true
}

// guardMain runs the guard process; stdin is the pipe.
func guardMain() int {
	// The guard shares the wrapper's process group, so keyboard and job
	// control signals meant for the wrapper must not end it.
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGHUP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	err := Watch(os.Stdin, func(msg string) { fmt.Fprintln(os.Stderr, "whimbrel runner guard: "+msg) }, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "whimbrel runner guard:", err)
		return 2
	}
	return 0
}

// Watch is the guard: it reads the read end of a guard pipe until the
// wrapper at the other end releases it, and stops the process group the
// wrapper named there if the wrapper dies instead (see the protocol above):
// SIGTERM, then SIGKILL once the grace has passed, or at once when hurry is
// closed (nil: never). say receives a line for each signal it sends. It
// returns nil once the wrapper released it, the pipe ended before a process
// group came, or the group is gone; an error only for a pipe that does not
// follow the protocol.
func Watch(r io.Reader, say func(msg string), hurry <-chan struct{}) error {
	// The line, one byte at a time: nothing after the newline may be
	// consumed here.
	var line []byte
	var b [1]byte
	for {
		n, err := r.Read(b[:])
		if n > 0 && b[0] == '\n' {
			break
		}
		if n > 0 {
			line = append(line, b[0])
			if len(line) > 64 {
				return fmt.Errorf("bad guard line %q", line)
			}
			continue
		}
		if err != nil {
			return nil // the command never started
		}
	}
	pgid, grace, err := parseGuardLine(string(line))
	if err != nil {
		return err
	}
	for {
		n, err := r.Read(b[:])
		if n > 0 {
			return nil // released: the wrapper closed normally
		}
		if err != nil {
			break // end of file: the wrapper died
		}
	}
	if unix.Kill(-pgid, unix.SIGTERM) != nil {
		return nil // the group is gone already
	}
	say(fmt.Sprintf("the wrapper died; sent SIGTERM to process group %d", pgid))
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(guardPoll)
	defer tick.Stop()
	why := "outlived the grace"
wait:
	for {
		select {
		case <-tick.C:
			if errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) {
				return nil
			}
			continue
		case <-deadline.C:
		case <-hurry:
			why = "is being killed at once"
		}
		break wait
	}
	if unix.Kill(-pgid, unix.SIGKILL) == nil {
		say(fmt.Sprintf("process group %d %s; sent SIGKILL", pgid, why))
	}
	return nil
}

// parseGuardLine reads "PGID GRACE".
func parseGuardLine(line string) (pgid int, grace time.Duration, err error) {
	p, g, ok := strings.Cut(strings.TrimSpace(line), " ")
	if ok {
		pgid, err = strconv.Atoi(p)
		if err == nil {
			grace, err = time.ParseDuration(g)
		}
	}
	if !ok || err != nil || pgid <= 1 || grace <= 0 {
		return 0, 0, fmt.Errorf("bad guard line %q: want PGID GRACE", line)
	}
	return pgid, grace, nil
}

// guard is the wrapper's side of a running guard.
type guard struct {
	grace   time.Duration
	reaping bool // the wrapper reaps every child: a guard process is collected there
	log     hclog.Logger

	mu       sync.Mutex
	w        *os.File // the only write end of the guard's pipe
	pid      int      // the guard process, 0 while a supervisor guards
	pgid     int      // the process group named, 0 before watch
	released bool

	// For a supervisor's pipe: wake ends watchSupervisor, which has ended
	// once watched is closed.
	wake    *os.File
	watched chan struct{}
}

// startGuard starts a guard process, before the command; watch then names
// the command's process group.
func startGuard(grace time.Duration, reaping bool, log hclog.Logger) (*guard, error) {
	g := &guard{grace: grace, reaping: reaping, log: log}
	if err := g.startProcess(); err != nil {
		return nil, err
	}
	return g, nil
}

// supervisedGuard makes w, the write end of a pipe a supervisor watches,
// the guard; watch then names the command's process group and starts
// watching for the supervisor's end. A supervisor gone already is replaced
// by a guard process now, before the command starts, as startGuard would:
// replacing it after the fork would leave the command unguarded while the
// guard process starts.
func supervisedGuard(w *os.File, grace time.Duration, reaping bool, log hclog.Logger) *guard {
	g := &guard{grace: grace, reaping: reaping, w: w, log: log}
	if broken(w) {
		_ = w.Close()
		if err := g.startProcess(); err != nil {
			log.Warn("the command will not be stopped if this wrapper is killed: the supervisor that was to guard it is gone", "error", err)
			return nil
		}
		log.Debug("the supervisor that was to guard the command is gone; started a guard process")
	}
	return g
}

// broken reports whether the reader of the pipe whose write end is w is gone.
func broken(w *os.File) bool {
	fds := []unix.PollFd{{Fd: int32(w.Fd())}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
}

// startProcess starts a guard process and makes its pipe g's.
func (g *guard) startProcess() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("create guard pipe: %w", err)
	}
	defer r.Close()
	env := append(os.Environ(), guardEnv+"=1")
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	proc, err := os.StartProcess("/proc/self/exe", []string{"whimbrel-runner-guard"}, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{r, devnull, os.Stderr},
		// Its own process group: a signal to the wrapper's group (a
		// launcher killing its wrapper with its group) must not take the
		// guard down with it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("start guard: %w", err)
	}
	g.w, g.pid = w, proc.Pid
	_ = proc.Release()
	return nil
}

// watch names the process group the guard stops if the wrapper dies. A
// supervisor's guard is watched from then on: a supervisor that goes away
// is replaced by a guard process.
func (g *guard) watch(pgid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pgid = pgid
	if _, err := fmt.Fprintf(g.w, "%d %s\n", pgid, g.grace); err != nil {
		if g.pid != 0 {
			return fmt.Errorf("tell the guard the process group: %w", err)
		}
		// The supervisor is gone already.
		return g.replaceLocked()
	}
	if g.pid == 0 {
		r, w, err := os.Pipe()
		if err != nil {
			// The supervisor guards all the same; only its own death
			// would go unnoticed.
			g.log.Warn("the command will not be guarded if its supervisor goes away first", "error", err)
			return nil
		}
		g.wake, g.watched = w, make(chan struct{})
		go g.watchSupervisor(r)
	}
	return nil
}

// watchSupervisor waits until the supervisor's end of the pipe is closed
// (the write end then polls as an error) and starts a guard process in its
// place, or until release wakes it through wake.
func (g *guard) watchSupervisor(wake *os.File) {
	defer close(g.watched)
	defer wake.Close()
	g.mu.Lock()
	fd := int32(g.w.Fd())
	g.mu.Unlock()
	fds := []unix.PollFd{{Fd: fd}, {Fd: int32(wake.Fd()), Events: unix.POLLIN}}
	for {
		if err := retryEINTR(func() error { _, err := unix.Poll(fds, -1); return err }); err != nil {
			g.log.Warn("the command will not be guarded if its supervisor goes away first", "error", err)
			return
		}
		if fds[1].Revents != 0 {
			return // released
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			break
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	if err := g.replaceLocked(); err != nil {
		g.log.Warn("the command will not be stopped if this wrapper is killed: the supervisor that guarded it is gone, and no guard process could replace it", "error", err)
		return
	}
	g.log.Debug("the supervisor that guarded the command is gone; started a guard process")
}

// replaceLocked starts a guard process in place of a supervisor that went
// away, and names the process group to it.
func (g *guard) replaceLocked() error {
	_ = g.w.Close()
	if err := g.startProcess(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(g.w, "%d %s\n", g.pgid, g.grace); err != nil {
		return fmt.Errorf("tell the guard the process group: %w", err)
	}
	return nil
}

// abort ends a guard whose command never started: end of file before a
// process group makes it return quietly.
func (g *guard) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = true
	_ = g.w.Close()
	if g.pid != 0 {
		var ws unix.WaitStatus
		_ = retryEINTR(func() error { _, err := unix.Wait4(g.pid, &ws, 0, nil); return err })
	}
}

// release lets the guard return without acting, and waits for what watched
// it to end. A guard process is collected here unless the wrapper reaps
// every child (then the reaper collects it).
func (g *guard) release() {
	if g.wake != nil {
		_ = g.wake.Close() // wakes watchSupervisor before its pipe closes
		<-g.watched
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return
	}
	g.released = true
	_, _ = g.w.Write([]byte{1})
	_ = g.w.Close()
	if g.pid != 0 && !g.reaping {
		var ws unix.WaitStatus
		_ = retryEINTR(func() error { _, err := unix.Wait4(g.pid, &ws, 0, nil); return err })
	}
}

// GuardPipeFD returns descriptor fd, inherited from a supervisor, as a
// Config.GuardPipe: it must be the write end of a pipe, and not 0, 1 or 2.
// It is made close-on-exec, used or not, so that no child inherits it
// (CloseInheritedGuardPipe does so earlier).
func GuardPipeFD(fd int) (*os.File, error) {
	if fd < 3 {
		return nil, fmt.Errorf("guard pipe: descriptor %d is standard input, output or error", fd)
	}
	unix.CloseOnExec(fd) // whether or not it is of use here
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("guard pipe: descriptor %d: %w", fd, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return nil, fmt.Errorf("guard pipe: descriptor %d is not a pipe", fd)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_WRONLY {
		return nil, fmt.Errorf("guard pipe: descriptor %d is not a pipe's write end", fd)
	}
	return os.NewFile(uintptr(fd), "guard pipe"), nil
}

// CloseInheritedGuardPipe makes the descriptor that the environment
// variable named env names (a supervisor's guard pipe, see GuardPipeFD)
// close-on-exec, so that nothing the program starts before it takes the
// pipe, nor after it refused it, inherits it. Call it first thing in main.
func CloseInheritedGuardPipe(env string) {
	if fd, err := strconv.Atoi(os.Getenv(env)); err == nil && fd >= 3 {
		unix.CloseOnExec(fd)
	}
}
