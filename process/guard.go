//go:build linux

package process

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The guard makes sure the command never outlives its wrapper. A wrapper
// killed with SIGKILL cannot stop anything, and the kernel's parent-death
// signal (PR_SET_PDEATHSIG) would reach the command alone, not the
// descendants in its process group, and would fire when the thread that
// forked it ends rather than the process. So Start runs a small guard
// process instead: this same executable, re-run through /proc/self/exe with
// guardEnv set, which the package's init turns into guardMain before the
// program's own main runs. The guard holds the read end of a pipe whose only
// write end is the wrapper's (close-on-exec, so the command has none).
//
// The guard is started before the command, and learns the command's process
// group through the pipe (a line "PGID\n") as soon as the fork returns, so
// that the wrapper's death right after the command starts still finds a
// guard up. When the wrapper closes normally it then writes a byte: the
// guard exits quietly. When the wrapper dies, the kernel closes the write
// end and the guard reads end of file: it sends SIGTERM to the command's
// process group, then SIGKILL after the kill grace. End of file before the
// process group came means the command never started (or the wrapper died
// between the fork and the write: the one window left, a few microseconds
// in which the command execs and the wrapper writes 8 bytes); the guard
// exits quietly.
const guardEnv = "WHIMBREL_RUNNER_GUARD"

// guardPoll is how often the guard checks whether the group is gone during
// the grace.
const guardPoll = 50 * time.Millisecond

func init() {
	if v, ok := os.LookupEnv(guardEnv); ok {
		os.Exit(guardMain(v))
	}
}

// guardMain runs the guard for "GRACE"; stdin is the pipe, which brings
// the process group first.
func guardMain(arg string) int {
	// The guard shares the wrapper's process group, so keyboard and job
	// control signals meant for the wrapper must not end it.
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGHUP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	grace, _ := time.ParseDuration(arg)
	if grace <= 0 {
		fmt.Fprintf(os.Stderr, "whimbrel runner guard: bad %s=%q\n", guardEnv, arg)
		return 2
	}
	// The process group, one byte at a time: nothing after the newline
	// may be consumed here.
	var line []byte
	var b [1]byte
	for {
		n, err := os.Stdin.Read(b[:])
		if n > 0 && b[0] == '\n' {
			break
		}
		if n > 0 {
			line = append(line, b[0])
			if len(line) > 20 {
				fmt.Fprintf(os.Stderr, "whimbrel runner guard: bad process group %q\n", line)
				return 2
			}
			continue
		}
		if err != nil {
			return 0 // the command never started
		}
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || pgid <= 1 {
		fmt.Fprintf(os.Stderr, "whimbrel runner guard: bad process group %q\n", line)
		return 2
	}
	for {
		n, err := os.Stdin.Read(b[:])
		if n > 0 {
			return 0 // released: the wrapper closed normally
		}
		if err != nil {
			break // end of file: the wrapper died
		}
	}
	if unix.Kill(-pgid, unix.SIGTERM) != nil {
		return 0 // the group is gone already
	}
	fmt.Fprintf(os.Stderr, "whimbrel runner guard: the wrapper died; sent SIGTERM to process group %d\n", pgid)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		time.Sleep(guardPoll)
		if errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) {
			return 0
		}
	}
	if unix.Kill(-pgid, unix.SIGKILL) == nil {
		fmt.Fprintf(os.Stderr, "whimbrel runner guard: process group %d outlived the grace; sent SIGKILL\n", pgid)
	}
	return 0
}

// guard is the wrapper's side of a running guard process.
type guard struct {
	w   *os.File // the only write end of the guard's stdin
	pid int
}

// startGuard starts a guard, before the command; watch then names the
// command's process group.
func startGuard(grace time.Duration) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create guard pipe: %w", err)
	}
	defer r.Close()
	env := append(os.Environ(), fmt.Sprintf("%s=%s", guardEnv, grace))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", os.DevNull, err)
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
		return nil, fmt.Errorf("start guard: %w", err)
	}
	g := &guard{w: w, pid: proc.Pid}
	_ = proc.Release()
	return g, nil
}

// watch names the process group the guard stops if the wrapper dies.
func (g *guard) watch(pgid int) error {
	if _, err := fmt.Fprintf(g.w, "%d\n", pgid); err != nil {
		return fmt.Errorf("tell the guard the process group: %w", err)
	}
	return nil
}

// release lets the guard exit without acting.
func (g *guard) release() {
	_, _ = g.w.Write([]byte{1})
	_ = g.w.Close()
}
