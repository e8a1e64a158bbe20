//go:build linux

package runner

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
// write end is the wrapper's (close-on-exec, so the command has none). When
// the wrapper closes normally it first writes a byte: the guard exits
// quietly. When the wrapper dies, the kernel closes the write end and the
// guard reads end of file: it sends SIGTERM to the command's process group,
// then SIGKILL after the kill grace.
const guardEnv = "WHIMBREL_RUNNER_GUARD"

// guardPoll is how often the guard checks whether the group is gone during
// the grace.
const guardPoll = 50 * time.Millisecond

func init() {
	if v, ok := os.LookupEnv(guardEnv); ok {
		os.Exit(guardMain(v))
	}
}

// guardMain runs the guard for "PGID GRACE"; stdin is the pipe.
func guardMain(arg string) int {
	// The guard shares the wrapper's process group, so keyboard and job
	// control signals meant for the wrapper must not end it.
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGHUP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	var pgid int
	var grace time.Duration
	if f := strings.Fields(arg); len(f) == 2 {
		pgid, _ = strconv.Atoi(f[0])
		grace, _ = time.ParseDuration(f[1])
	}
	if pgid <= 1 || grace <= 0 {
		fmt.Fprintf(os.Stderr, "whimbrel runner guard: bad %s=%q\n", guardEnv, arg)
		return 2
	}
	var b [1]byte
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

// startGuard starts a guard for process group pgid.
func startGuard(pgid int, grace time.Duration) (*guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create guard pipe: %w", err)
	}
	defer r.Close()
	env := append(os.Environ(), fmt.Sprintf("%s=%d %s", guardEnv, pgid, grace))
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

// release lets the guard exit without acting.
func (g *guard) release() {
	_, _ = g.w.Write([]byte{1})
	_ = g.w.Close()
}
