package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestSIGINTIsOnlyRelayed: a command that handles SIGINT and carries on is
// left running (as under tini), and a later SIGTERM, the first one, gets
// the whole kill grace rather than an immediate SIGKILL.
func TestSIGINTIsOnlyRelayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	dir := t.TempDir()
	ready, gotINT := filepath.Join(dir, "ready"), filepath.Join(dir, "int")
	// The command notes SIGINT, then on SIGTERM takes 300 ms to clean up
	// and exits 0. ("sleep & wait" keeps the shell interruptible.)
	script := `trap 'touch ` + gotINT + `' INT; trap 'sleep 0.3; exit 0' TERM; touch ` + ready +
		`; while :; do sleep 0.1 & wait; done`
	w := start(t, f.env(t, "a"), "--kill-grace", "5s", "--", "sh", "-c", script)
	waitFile(t, ready)
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFile(t, gotINT)
	time.Sleep(700 * time.Millisecond) // longer than a grace that SIGINT could have armed
	select {
	case <-w.done:
		t.Fatalf("the command did not survive a SIGINT it handles: exit %d\n%s", w.code, w.stderr.String())
	default:
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d, want 0: the command's SIGTERM handler must win\n%s", code, w.stderr.String())
	}
	if a := f.get(t, "a"); a.State != state.Completed {
		t.Errorf("a: %s, want COMPLETED", a.State)
	}
}

// TestSIGTERMBeforeTheCommandStarts sends SIGTERM while the claim is in
// flight (the store is slowed by a proxy): the command is not started, the
// activity is recorded FAILED by SIGTERM, and the wrapper exits 143.
func TestSIGTERMBeforeTheCommandStarts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	proxy := dynamotest.NewProxy(t)
	proxy.SetDelay(time.Second)
	ran := filepath.Join(t.TempDir(), "ran")
	w := start(t, f.env(t, "a", "AWS_ENDPOINT_URL_DYNAMODB="+proxy.Endpoint), "--", "touch", ran)
	// The wrapper is up, its first read held by the proxy: it has a
	// connection open. A fixed wait could end, on a loaded machine, before
	// the wrapper's main caught signals, and SIGTERM would kill it outright.
	waitSocket(t, w.cmd.Process.Pid)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t, time.Minute); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, w.stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the command ran after a SIGTERM that came before it started")
	}
	a := f.get(t, "a")
	if a.State != state.Failed || a.ExitCode == nil || *a.ExitCode != 143 || a.Signal != "SIGTERM" ||
		!strings.Contains(a.Reason, "before the command started") {
		t.Errorf("a: state %s exit %v signal %q reason %q; want FAILED 143 SIGTERM before the command started",
			a.State, a.ExitCode, a.Signal, a.Reason)
	}
}

// TestSIGTERMWhileOpeningTheStore sends SIGTERM while the wrapper is still
// opening the store (its AWS config file is a FIFO that nobody writes to
// yet, so loading the config blocks): the signal is caught from the start
// of main, so the wrapper neither dies of it nor forgets it; the command
// is not started, the activity is recorded FAILED by SIGTERM, exit 143.
func TestSIGTERMWhileOpeningTheStore(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "aws-config")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(dir, "ran")
	w := start(t, f.env(t, "a", "AWS_CONFIG_FILE="+fifo), "--", "touch", ran)
	// The wrapper is up, blocked reading its config: a writer that does
	// not wait can open the FIFO only once the wrapper opened it to read
	// (ENXIO before). A fixed wait could end, on a loaded machine, before
	// the wrapper's main caught signals, and SIGTERM would kill it outright.
	var c *os.File
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if c, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the wrapper never opened its config (%v)\n%s", err, w.stderr.String())
		}
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// Let the config load finish.
	_, err := c.WriteString("[default]\n")
	if cerr := c.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("writing the config: %v", err)
	}
	code := w.wait(t, time.Minute)
	if code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, w.stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the command ran after a SIGTERM that came before it started")
	}
	a := f.get(t, "a")
	if a.State != state.Failed || a.ExitCode == nil || *a.ExitCode != 143 || a.Signal != "SIGTERM" ||
		!strings.Contains(a.Reason, "before the command started") {
		t.Errorf("a: state %s exit %v signal %q reason %q; want FAILED 143 SIGTERM before the command started",
			a.State, a.ExitCode, a.Signal, a.Reason)
	}
}

// TestSIGTERMEndsTheClaimRetries: with the store unreachable the claim is
// retried, but a SIGTERM ends the retries at once: the wrapper tries to
// record the signal for a bounded time (within Docker's stop timeout) and
// exits 143, instead of retrying the claim for its full minute.
func TestSIGTERMEndsTheClaimRetries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	proxy := dynamotest.NewProxy(t)
	proxy.Cut() // connections refused
	ran := filepath.Join(t.TempDir(), "ran")
	w := start(t, f.env(t, "a", "AWS_ENDPOINT_URL_DYNAMODB="+proxy.Endpoint), "--", "touch", ran)
	// The claim is being retried: the wrapper said so. A fixed wait could
	// end, on a loaded machine, before the wrapper claimed at all.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(w.stderr.String(), "retrying"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper never retried its claim\n%s", w.stderr.String())
		}
	}
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	code := w.wait(t, time.Minute)
	took := time.Since(sent)
	if code != 143 || took > 20*time.Second {
		t.Fatalf("exit %d %s after SIGTERM, want 143 within 20 s\n%s", code, took.Round(time.Millisecond), w.stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("the command ran")
	}
	if !strings.Contains(w.stderr.String(), "stopped by a signal while claiming") {
		t.Errorf("the log does not say why it stopped:\n%s", w.stderr.String())
	}
}

// TestWrapperDiesRightAfterTheCommandStarts: the wrapper dies (a fault
// point, as kill -9 would) the moment the command has started, before it
// does anything else: the guard, started before the command, stops the
// command's process group all the same.
func TestWrapperDiesRightAfterTheCommandStarts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	dir := t.TempDir()
	child, grandchild := filepath.Join(dir, "child"), filepath.Join(dir, "grandchild")
	w := start(t, f.env(t, "a", fault.Env+"="+fault.AfterCommandStart), "--kill-grace", "2s", "--",
		"sh", "-c", `sleep 300 & echo $! > `+grandchild+`.tmp; mv `+grandchild+`.tmp `+grandchild+
			`; echo $$ > `+child+`.tmp; mv `+child+`.tmp `+child+`; wait`)
	// The wait ends once the wrapper's stdout and stderr close, which the
	// command holds too: an orphaned command makes it time out.
	if code := w.wait(t, 30*time.Second); code != fault.ExitCode {
		t.Fatalf("exit %d, want the fault point's %d\n%s", code, fault.ExitCode, w.stderr.String())
	}
	// The command may have been stopped before it wrote its pids: give it
	// a moment, then check what it wrote.
	var pids []int
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && len(pids) < 2 {
		pids = pids[:0]
		for _, file := range []string{child, grandchild} {
			if _, err := os.Stat(file); err == nil {
				pids = append(pids, readPID(t, file))
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	deadline = time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d outlived its wrapper, which died right after starting it\n%s", pid, w.stderr.String())
		}
	}
	if !strings.Contains(w.stderr.String(), "guard") && len(pids) == 2 {
		t.Errorf("the guard said nothing:\n%s", w.stderr.String())
	}
}

// TestKill9StopsTheCommand kills whimbrel-run outright, as it runs under a
// local launcher or a shell (not PID 1): its command and the command's
// child must stop too.
func TestKill9StopsTheCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	dir := t.TempDir()
	child, grandchild := filepath.Join(dir, "child"), filepath.Join(dir, "grandchild")
	w := start(t, f.env(t, "a"), "--log-level", "debug", "--kill-grace", "2s", "--",
		"sh", "-c", `sleep 300 & echo $! > `+grandchild+`.tmp; mv `+grandchild+`.tmp `+grandchild+
			`; echo $$ > `+child+`.tmp; mv `+child+`.tmp `+child+`; wait`)
	waitFile(t, child)
	waitFile(t, grandchild)
	pids := []int{readPID(t, child), readPID(t, grandchild)}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Killed before it has named the command's process group to its guard
	// (the window between the fork and that line), the command would run
	// on: wait until the wrapper says it is guarded.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(w.stderr.String(), "guarded:") {
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper never said its command is guarded:\n%s", w.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 10*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d outlived its wrapper's kill -9", pid)
		}
	}
}

// TestParentDeathSignal: with --parent-death-signal TERM, the death of
// whimbrel-run's parent stops the command as a docker stop would, and the
// outcome is recorded.
func TestParentDeathSignal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	ready := filepath.Join(t.TempDir(), "ready")
	// The parent is a shell that starts the wrapper and waits; the test
	// kills the shell.
	parent := exec.Command("sh", "-c", `"$0" --parent-death-signal TERM -- sh -c 'touch "$1"; exec sleep 300' sh "$1" & wait`,
		binary, ready)
	parent.Env = f.env(t, "a")
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, ready)
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := f.get(t, "a")
		if a.State == state.Failed && a.Signal == "SIGTERM" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a: state %s signal %q 20 s after the parent died; want FAILED by SIGTERM", a.State, a.Signal)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitSocket waits until the process pid has a socket open.
func waitSocket(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d opened no connection within a minute", pid)
		}
	}
}
