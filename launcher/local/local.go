// Package local is the launcher's local backend: it starts each activity
// as a child process, whimbrel-run -- COMMAND, and is the guard of the
// wrappers it starts. whimbrel-launcher serves the local launch type with
// it, and whimbrel run runs a whole workflow on it.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
)

// Backend starts each activity as a child process: whimbrel-run --
// COMMAND, with the identity in its environment. It reaps its children and
// is their guard (process.Watch): should a wrapper be killed outright,
// Backend stops its command's process group. Wait waits for all of them.
type Backend struct {
	// Wrapper is the whimbrel-run binary.
	Wrapper string
	// Env is the base environment of every child (default: the launcher's).
	Env []string
	// LogDir, when set, receives each activity's output in
	// ACTIVITY_EXEC_ID.log; otherwise children share the launcher's stdout
	// and stderr.
	LogDir string
	// ByWorkflow puts each activity's log in a folder of LogDir per
	// workflow execution (LogFolder), as whimbrel run lays them out.
	ByWorkflow bool
	Logger     hclog.Logger
	// Exited, when set, is called once a child has exited, with the error
	// its wait returned (nil: it exited 0).
	Exited func(j launcher.Job, exit error)
	// Supervise is how each activity is supervised: SuperviseProcess
	// (the default) or SuperviseInline, which needs Store.
	Supervise string
	// Store is the launcher's open store, which activities supervised
	// inline report to (NewLauncher sets it from the launcher's).
	Store state.Store
	// handoff hands the launcher the activities that one supervised
	// inline readied (handoff.go).
	handoff func([]state.ActivityKey)
	// wakeList starts a pass that lists the READY index: the elements of
	// a map that one supervised inline readied are not all handed over.
	wakeList func()
	// live are the runs supervised inline that have not advanced their
	// workflows yet (live.go).
	live liveRuns

	wg sync.WaitGroup
	// inlineWG counts the activities supervised inline that have not
	// ended; inlineRuns are they, for Signal; guardProc guards their
	// commands.
	inlineWG   sync.WaitGroup
	inlineRuns map[*inlineRun]struct{}
	guardProc  *process.GroupGuard
	mu         sync.Mutex
	// children are those that have not exited, for Signal. A child leaves
	// it before it is reaped, so that its pid, and the process group named
	// after it, are still its own when Signal sends to them.
	children map[*child]struct{}
	// ending are the children that have exited whose guard has not
	// returned yet (WaitGuards).
	ending map[*child]struct{}
	// killing is closed by the first Signal(SIGKILL): from then on the
	// guards kill their commands' groups at once instead of after a grace
	// (the backend is then being shut down, as whimbrel run's third
	// Ctrl-C does).
	killing chan struct{}
	// quitting is set by Quit: nothing new is launched from then on, so
	// that no command starts after the kill and nothing joins the wait
	// groups Quit waits on.
	quitting    bool
	killingOnce sync.Once
}

// child is one wrapper the backend started, and its guard.
type child struct {
	cmd *exec.Cmd
	job launcher.Job
	// guarded is closed once the guard has returned: the wrapper released
	// it, or the guard has stopped the command's process group.
	guarded chan struct{}
}

var _ launcher.Backend = (*Backend)(nil)

// hurry is closed once the children are being killed.
func (b *Backend) hurry() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killing == nil {
		b.killing = make(chan struct{})
	}
	return b.killing
}

// Launch implements launcher.Backend.
func (b *Backend) Launch(ctx context.Context, j launcher.Job) (string, error) {
	if len(j.Command) == 0 {
		return "", fmt.Errorf("activity %s has no command to run locally", j.ActivityName)
	}
	if b.isQuitting() {
		return "", quittingError(j)
	}
	if b.inline(j) {
		return b.launchInline(ctx, j)
	}
	if b.Wrapper == "" {
		return "", errNoWrapper
	}
	// --subreaper: the wrapper is not PID 1 here, and orphans of the
	// command are its to reap, not the launcher's host's init.
	cmd := exec.Command(b.Wrapper, append([]string{"--subreaper", "--"}, j.Command...)...)
	env := b.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), j.Environ()...)
	// Its own process group: a Ctrl-C meant for the launcher must not reach
	// the activities; whoever stops them does it through the state.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The launcher is the wrapper's guard (process.Watch): it stops the
	// command's process group should the wrapper be killed outright, so
	// the wrapper needs no guard process of its own. A wrapper that
	// outlives the launcher starts one when the pipe breaks.
	guardR, guardW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("create the guard pipe: %w", err)
	}
	defer guardW.Close() // the child has its own copy
	cmd.ExtraFiles = []*os.File{guardW}
	cmd.Env = append(cmd.Env, state.EnvGuardFD+"=3")
	if b.LogDir != "" {
		dir := b.LogDir
		if b.ByWorkflow {
			dir = filepath.Join(dir, LogFolder(j.Key.WorkflowExecID))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				guardR.Close()
				return "", fmt.Errorf("create the activity's log folder: %w", err)
			}
		}
		// The log is what the command printed, secrets included: its
		// user's alone, whatever the umask.
		f, err := os.OpenFile(filepath.Join(dir, j.Key.ActivityExecID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			guardR.Close()
			return "", fmt.Errorf("open the activity's log: %w", err)
		}
		defer f.Close() // the child has its own copy
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		guardR.Close()
		return "", fmt.Errorf("start %s: %w", b.Wrapper, err)
	}
	c := &child{cmd: cmd, job: j, guarded: make(chan struct{})}
	b.mu.Lock()
	if b.quitting { // Quit came while the wrapper started: it is killed, not kept
		b.mu.Unlock()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		guardR.Close()
		return "", quittingError(j)
	}
	if b.children == nil {
		b.children, b.ending = map[*child]struct{}{}, map[*child]struct{}{}
	}
	b.children[c] = struct{}{}
	b.wg.Add(2) // under mu, which Quit takes before it waits
	b.mu.Unlock()
	go b.guard(c, guardR)
	go b.wait(c, guardR)
	return "pid:" + strconv.Itoa(cmd.Process.Pid), nil
}

// guardDrain bounds how long a guard reads its pipe once its wrapper has
// exited: the wrapper wrote all it ever will before it exited.
const guardDrain = time.Second

// guard runs the guard of c's wrapper, which has the write end of r:
// process.Watch stops the command's process group if the wrapper dies
// without releasing it.
func (b *Backend) guard(c *child, r *os.File) {
	defer b.wg.Done()
	defer r.Close()
	say := func(msg string) { b.warn(msg, c) }
	if err := process.Watch(r, say, b.hurry()); err != nil {
		say(err.Error())
	}
	b.mu.Lock()
	close(c.guarded)
	delete(b.ending, c)
	b.mu.Unlock()
}

// wait waits for c's wrapper to exit, reaps it, ends its guard's reading
// and tells Exited.
func (b *Backend) wait(c *child, guardR *os.File) {
	defer b.wg.Done()
	pid := c.cmd.Process.Pid
	// Wait for the exit without reaping it (WNOWAIT): until c leaves
	// children, its pid cannot be given to another process, so Signal,
	// which sends to the pid's process group, reaches only c's.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	b.mu.Lock()
	delete(b.children, c)
	select {
	case <-c.guarded:
	default:
		b.ending[c] = struct{}{}
	}
	b.mu.Unlock()
	err := c.cmd.Wait()
	// The wrapper is gone: its guard ends once it has read what is left in
	// the pipe, even if a copy of the pipe's write end outlives the
	// wrapper (one that did not take it left it to its command): a guard
	// not released by then stops the command.
	_ = guardR.SetReadDeadline(time.Now().Add(guardDrain))
	if b.Logger != nil {
		status := "exit status 0"
		if err != nil {
			status = err.Error()
		}
		b.Logger.Debug("activity process ended", "pid", pid, "activity_exec_id", c.job.Key.ActivityExecID, "status", status)
	}
	if b.Exited != nil {
		b.Exited(c.job, err)
	}
}

func (b *Backend) warn(msg string, c *child) {
	if b.Logger != nil {
		b.Logger.Warn(msg, "pid", c.cmd.Process.Pid, "activity_exec_id", c.job.Key.ActivityExecID)
	}
}

// WaitGuards waits for the guards of the wrappers that have exited: a
// guard that is stopping a killed wrapper's command (SIGTERM, the grace,
// SIGKILL) is not left half done when the launcher exits. The guards of
// wrappers still running are not waited for: when the launcher exits, each
// of those wrappers starts a guard process of its own.
func (b *Backend) WaitGuards() {
	b.mu.Lock()
	ending := make([]*child, 0, len(b.ending))
	for c := range b.ending {
		ending = append(ending, c)
	}
	b.mu.Unlock()
	for _, c := range ending {
		<-c.guarded
	}
}

// Running returns how many children have not exited, and activities
// supervised inline have not ended.
func (b *Backend) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.children) + len(b.inlineRuns)
}

// Jobs returns the jobs of the children that have not exited.
func (b *Backend) Jobs() []launcher.Job {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]launcher.Job, 0, len(b.children)+len(b.inlineRuns))
	for c := range b.children {
		out = append(out, c.job)
	}
	for r := range b.inlineRuns {
		out = append(out, r.job)
	}
	return out
}

// LogFolder is the folder, within a log folder, of an execution's logs:
// its ID with the "::" a file manager would stumble on made a "-".
func LogFolder(workflowExecID string) string {
	return strings.ReplaceAll(workflowExecID, "::", "-")
}

// Signal sends sig to every child's process group. SIGKILL also makes the
// guards of those whose wrappers it kills kill their commands at once.
func (b *Backend) Signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		k := b.hurry()
		b.killingOnce.Do(func() { close(k) })
	}
	b.signalInline(sig)
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.children {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// Wait waits for every child to exit, and for the guard of each to have
// released it or stopped its command, and for every activity supervised
// inline to end.
func (b *Backend) Wait() {
	b.wg.Wait()
	b.closeGuard()
}
