package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
)

// Local starts each activity as a child process: whimbrel-run -- COMMAND,
// with the identity in its environment. It reaps its children and is their
// guard (process.Watch): should a wrapper be killed outright, Local stops
// its command's process group. Wait waits for all of them.
type Local struct {
	// Wrapper is the whimbrel-run binary.
	Wrapper string
	// Env is the base environment of every child (default: the launcher's).
	Env []string
	// LogDir, when set, receives each activity's output in
	// ACTIVITY_EXEC_ID.log; otherwise children share the launcher's stdout
	// and stderr.
	LogDir string
	Logger hclog.Logger
	// Exited, when set, is called once a child has exited, with how.
	Exited func(j Job, status string)

	wg sync.WaitGroup
	mu sync.Mutex
	// children by pid, for Signal.
	children map[int]*exec.Cmd
	// ending holds, by pid, the guards of wrappers that have exited and
	// that have not returned yet (WaitGuards).
	ending map[int]chan struct{}
	// killing is closed by the first Signal(SIGKILL): from then on the
	// guards kill their commands' groups at once instead of after a grace
	// (Local is then being shut down, as whimbrel run's third Ctrl-C
	// does).
	killing     chan struct{}
	killingOnce sync.Once
}

// hurry is closed once the children are being killed.
func (b *Local) hurry() chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.killing == nil {
		b.killing = make(chan struct{})
	}
	return b.killing
}

var _ Backend = (*Local)(nil)

// exitedOK is the status Local.Exited is told for a child that exited 0.
const exitedOK = "exit status 0"

// FindWrapper returns the whimbrel-run beside the running binary, or the one
// on PATH.
func FindWrapper() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "whimbrel-run")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("whimbrel-run")
	if err != nil {
		return "", fmt.Errorf("whimbrel-run is neither beside this binary nor on PATH: install it, or name it with --wrapper")
	}
	return p, nil
}

// Launch implements Backend.
func (b *Local) Launch(ctx context.Context, j Job) (string, error) {
	if len(j.Command) == 0 {
		return "", fmt.Errorf("activity %s has no command to run locally", j.ActivityName)
	}
	// --subreaper: the wrapper is not PID 1 here, and orphans of the
	// command are its to reap, not the launcher's host's init.
	cmd := exec.Command(b.Wrapper, append([]string{"--subreaper", "--"}, j.Command...)...)
	env := b.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...), envList(j.Env)...)
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
		// The log is what the command printed, secrets included: its
		// user's alone, whatever the umask.
		f, err := os.OpenFile(filepath.Join(b.LogDir, j.Key.ActivityExecID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
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
	pid := cmd.Process.Pid
	watched := b.guard(pid, j, guardR)
	b.mu.Lock()
	if b.children == nil {
		b.children, b.ending = map[int]*exec.Cmd{}, map[int]chan struct{}{}
	}
	b.children[pid] = cmd
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		err := cmd.Wait()
		b.mu.Lock()
		delete(b.children, pid)
		select {
		case <-watched:
		default:
			b.ending[pid] = watched
		}
		b.mu.Unlock()
		// The wrapper is gone: its guard ends once it has read what is
		// left in the pipe, even if a copy of the pipe's write end
		// outlives the wrapper (one that did not take it left it to its
		// command): a guard not released by then stops the command.
		_ = guardR.SetReadDeadline(time.Now().Add(guardDrain))
		status := exitedOK
		if err != nil {
			status = err.Error()
		}
		if b.Logger != nil {
			b.Logger.Debug("activity process ended", "pid", pid, "activity_exec_id", j.Key.ActivityExecID, "status", status)
		}
		if b.Exited != nil {
			b.Exited(j, status)
		}
	}()
	return "pid:" + strconv.Itoa(pid), nil
}

// guardDrain bounds how long a guard reads its pipe once its wrapper has
// exited: the wrapper wrote all it ever will before it exited.
const guardDrain = time.Second

// guard runs the guard of the wrapper pid, which has the write end of r:
// process.Watch stops the command's process group if the wrapper dies
// without releasing it. watched is closed once the guard has returned.
func (b *Local) guard(pid int, j Job, r *os.File) (watched chan struct{}) {
	watched = make(chan struct{})
	say := func(msg string) {
		if b.Logger != nil {
			b.Logger.Warn(msg, "pid", pid, "activity_exec_id", j.Key.ActivityExecID)
		}
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer r.Close()
		if err := process.Watch(r, say, b.hurry()); err != nil {
			say(err.Error())
		}
		b.mu.Lock()
		close(watched)
		if b.ending[pid] == watched { // not a later child's of the same pid
			delete(b.ending, pid)
		}
		b.mu.Unlock()
	}()
	return watched
}

// WaitGuards waits for the guards of the wrappers that have exited: a
// guard that is stopping a killed wrapper's command (SIGTERM, the grace,
// SIGKILL) is not left half done when the launcher exits. The guards of
// wrappers still running are not waited for: when the launcher exits, each
// of those wrappers starts a guard process of its own.
func (b *Local) WaitGuards() {
	b.mu.Lock()
	var ending []chan struct{}
	for _, c := range b.ending {
		ending = append(ending, c)
	}
	b.mu.Unlock()
	for _, c := range ending {
		<-c
	}
}

// Running returns how many children have not exited.
func (b *Local) Running() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.children)
}

// Signal sends sig to every child's process group. SIGKILL also makes the
// guards of those whose wrappers it kills kill their commands at once.
func (b *Local) Signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		k := b.hurry()
		b.killingOnce.Do(func() { close(k) })
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for pid := range b.children {
		_ = syscall.Kill(-pid, sig)
	}
}

// Wait waits for every child to exit, and for the guard of each to have
// released it or stopped its command.
func (b *Local) Wait() { b.wg.Wait() }

// envList writes an environment map as KEY=VALUE, in a stable order.
func envList(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
