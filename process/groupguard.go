//go:build linux

package process

import (
	"bufio"
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

// A GroupGuard is one guard process shared by every command a long-lived
// supervisor runs in its own process (a launcher that supervises its
// local activities inline, without a wrapper process per activity). A
// supervisor killed outright (kill -9) cannot stop its commands, so the
// guard process holds the read end of a pipe whose only write end the
// supervisor holds (close-on-exec, so no command inherits it), and is
// told each command's process group as it starts and when it ends:
//
//	+PGID GRACE\n   watch this process group
//	-PGID\n         stop watching it (the command ended)
//	q\n             the supervisor is closing normally: exit quietly
//
// End of file without "q" means the supervisor died: the guard sends
// SIGTERM to every group it watches, then SIGKILL to those left once the
// longest of their graces has passed. The guard process is this same
// executable, re-run with groupGuardEnv set, so the program must call
// GroupGuardMain first thing in main, as a wrapper calls GuardMain for
// Start's guard process.
type GroupGuard struct {
	log hclog.Logger

	mu      sync.Mutex
	w       *os.File
	pid     int
	watched map[int]time.Duration // for a guard process started again
	closed  bool
}

// groupGuardEnv marks a group guard process. It is not guardEnv: a
// supervisor is never turned into Start's guard by a variable it
// inherited, nor a wrapper into a group guard.
const groupGuardEnv = "WHIMBREL_GROUP_GUARD"

// GroupGuardMain runs the group guard process when StartGroupGuard re-ran
// this executable as one, and returns the exit code for main to exit with
// and true; it returns false at once in any other process. A program that
// calls StartGroupGuard calls it first thing in main:
//
//	func main() {
//		if code, ok := process.GroupGuardMain(); ok {
//			os.Exit(code)
//		}
//		…
//	}
func GroupGuardMain() (code int, ok bool) {
	if os.Getenv(groupGuardEnv) != "1" {
		return 0, false
	}
	return groupGuardMain(), true
}

// StartGroupGuard starts the guard process shared by a supervisor's
// commands. Close releases it.
func StartGroupGuard(log hclog.Logger) (*GroupGuard, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	g := &GroupGuard{log: log, watched: map[int]time.Duration{}}
	if err := g.startLocked(); err != nil {
		return nil, err
	}
	return g, nil
}

// startLocked starts a guard process and tells it the groups watched.
func (g *GroupGuard) startLocked() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("create group guard pipe: %w", err)
	}
	defer r.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	defer devnull.Close()
	proc, err := os.StartProcess("/proc/self/exe", []string{"whimbrel-group-guard"}, &os.ProcAttr{
		Env:   append(os.Environ(), groupGuardEnv+"=1"),
		Files: []*os.File{r, devnull, os.Stderr},
		// Its own process group: a Ctrl-C or a signal to the supervisor's
		// group must not take the guard down with it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return fmt.Errorf("start the group guard: %w", err)
	}
	g.w, g.pid = w, proc.Pid
	_ = proc.Release()
	for pgid, grace := range g.watched {
		if _, err := fmt.Fprintf(g.w, "+%d %s\n", pgid, grace); err != nil {
			return fmt.Errorf("tell the group guard process group %d: %w", pgid, err)
		}
	}
	return nil
}

// say writes one line to the guard process, starting a new one should
// the guard process be gone (killed by someone): the commands stay
// guarded.
func (g *GroupGuard) say(line string) error {
	if g.closed {
		return errors.New("the group guard is closed")
	}
	if _, err := io.WriteString(g.w, line); err == nil {
		return nil
	}
	g.log.Warn("the group guard process is gone; starting another")
	_ = g.w.Close()
	g.reapLocked()
	return g.startLocked()
}

// Watch names a command's process group, right after its fork: should
// the supervisor die, the guard stops it (SIGTERM, SIGKILL after grace).
func (g *GroupGuard) Watch(pgid int, grace time.Duration) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.watched[pgid] = grace
	if err := g.say(fmt.Sprintf("+%d %s\n", pgid, grace)); err != nil {
		return fmt.Errorf("guard process group %d: %w", pgid, err)
	}
	return nil
}

// Release stops watching a process group whose command has ended.
func (g *GroupGuard) Release(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.watched, pgid)
	if err := g.say(fmt.Sprintf("-%d\n", pgid)); err != nil {
		g.log.Debug("releasing a process group from the group guard failed", "process_group", pgid, "error", err)
	}
}

// Close lets the guard process exit without acting and collects it. The
// commands still running are no longer guarded.
func (g *GroupGuard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	_, _ = io.WriteString(g.w, "q\n")
	g.closed = true
	err := g.w.Close()
	g.reapLocked()
	return err
}

// reapLocked collects the guard process once it has exited.
func (g *GroupGuard) reapLocked() {
	if g.pid == 0 {
		return
	}
	var ws unix.WaitStatus
	_ = retryEINTR(func() error { _, err := unix.Wait4(g.pid, &ws, 0, nil); return err })
	g.pid = 0
}

// Pid is the guard process's ID.
func (g *GroupGuard) Pid() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pid
}

// groupGuardMain runs a group guard process; stdin is the pipe.
func groupGuardMain() int {
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGHUP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGPIPE)
	say := func(msg string) { fmt.Fprintln(os.Stderr, "whimbrel group guard: "+msg) }
	groups, quit, err := readGroups(os.Stdin)
	if err != nil {
		say(err.Error())
	}
	if quit {
		return 0
	}
	stopGroups(groups, say)
	return 0
}

// readGroups reads the guard's pipe until the supervisor quits ("q") or
// the pipe ends, and returns the groups still watched, and the last line
// that did not follow the protocol (skipped), if any.
func readGroups(r io.Reader) (groups map[int]time.Duration, quit bool, err error) {
	groups = map[int]time.Duration{}
	br := bufio.NewReader(r)
	for {
		line, rerr := br.ReadString('\n')
		if rerr != nil {
			return groups, false, err // the supervisor died (a partial line is dropped)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "q":
			return groups, true, err
		case strings.HasPrefix(line, "+"):
			pgid, grace, perr := parseGuardLine(line[1:])
			if perr != nil {
				err = perr
				continue
			}
			groups[pgid] = grace
		case strings.HasPrefix(line, "-"):
			pgid, perr := strconv.Atoi(line[1:])
			if perr != nil {
				err = fmt.Errorf("bad group guard line %q", line)
				continue
			}
			delete(groups, pgid)
		default:
			err = fmt.Errorf("bad group guard line %q", line)
		}
	}
}

// stopGroups sends SIGTERM to every group, then SIGKILL to those left
// once the longest grace has passed.
func stopGroups(groups map[int]time.Duration, say func(string)) {
	var grace time.Duration
	for pgid, g := range groups {
		if unix.Kill(-pgid, unix.SIGTERM) != nil {
			delete(groups, pgid) // gone already
			continue
		}
		say(fmt.Sprintf("the supervisor died; sent SIGTERM to process group %d", pgid))
		grace = max(grace, g)
	}
	deadline := time.Now().Add(grace)
	for len(groups) > 0 && time.Now().Before(deadline) {
		time.Sleep(guardPoll)
		for pgid := range groups {
			if errors.Is(unix.Kill(-pgid, 0), unix.ESRCH) {
				delete(groups, pgid)
			}
		}
	}
	for pgid := range groups {
		if unix.Kill(-pgid, unix.SIGKILL) == nil {
			say(fmt.Sprintf("process group %d outlived the grace; sent SIGKILL", pgid))
		}
	}
}
