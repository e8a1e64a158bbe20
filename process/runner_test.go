//go:build linux

package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// waitTimeout bounds every wait in these tests.
const waitTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	// The wrapper this binary doubles as starts guard processes: this
	// binary again.
	if code, ok := GuardMain(); ok {
		os.Exit(code)
	}
	if os.Getenv(envSigconf) == "1" {
		os.Exit(sigconfMain())
	}
	if os.Getenv(envWrapper) == "1" {
		os.Exit(wrapperMain())
	}
	os.Exit(m.Run())
}

// start starts cfg and closes the Process when the test ends.
func start(t *testing.T, cfg Config) *Process {
	t.Helper()
	p, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%q): %v", cfg.Args, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// wait waits for p's Result within waitTimeout.
func wait(t *testing.T, p *Process) Result {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(waitTimeout):
		t.Fatalf("child %d did not exit within %v", p.Pid(), waitTimeout)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return res
}

// readWhenWritten polls for a file the child writes, within waitTimeout.
func readWhenWritten(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within %v", path, waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits until pid no longer runs: it has vanished or is a zombie
// awaiting a reaper that is not this test's concern.
func waitGone(t *testing.T, pid string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		state, _, ok := procStat(pid)
		if !ok || state == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still running (state %s) after %v", pid, state, waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantSignal syscall.Signal
		wantStatus int
	}{
		{"success", []string{"true"}, 0, 0, 0},
		{"failure", []string{"sh", "-c", "exit 3"}, 3, 0, 3},
		{"killed by SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, -1, syscall.SIGTERM, 143},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := wait(t, start(t, Config{Args: tt.args}))
			if res.Code != tt.wantCode || res.Signal != tt.wantSignal || res.ExitStatus() != tt.wantStatus {
				t.Errorf("got code %d signal %v status %d, want %d %v %d",
					res.Code, res.Signal, res.ExitStatus(), tt.wantCode, tt.wantSignal, tt.wantStatus)
			}
			if res.Stopped {
				t.Errorf("Stopped = true for a child the runner never stopped")
			}
		})
	}
}

func TestStdio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		tailSize int
		wantTail int
		lines    int // four-byte records written to stderr
	}{
		{"configured tail", 100, 100, 300},
		{"default tail", 0, DefaultStderrTailSize, 1500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			stdin := openFile(t, filepath.Join(dir, "in"), "from stdin\n")
			stdout := openFile(t, filepath.Join(dir, "out"), "")
			var stderr bytes.Buffer
			script := `cat; i=0; while [ $i -lt "$1" ]; do printf "%04d" $i >&2; i=$((i+1)); done`
			p := start(t, Config{
				Args:           []string{"sh", "-c", script, "sh", strconv.Itoa(tt.lines)},
				Stdin:          stdin,
				Stdout:         stdout,
				Stderr:         &stderr,
				StderrTailSize: tt.tailSize,
			})
			res := wait(t, p)

			var want strings.Builder
			for i := range tt.lines {
				fmt.Fprintf(&want, "%04d", i)
			}
			if stderr.String() != want.String() {
				t.Errorf("stderr passthrough changed the stream: got %d bytes, want %d", stderr.Len(), want.Len())
			}
			wantTail := want.String()[want.Len()-tt.wantTail:]
			if string(res.StderrTail) != wantTail {
				t.Errorf("StderrTail = %q, want %q", res.StderrTail, wantTail)
			}
			if live := p.StderrTail(); string(live) != wantTail {
				t.Errorf("Process.StderrTail = %q, want %q", live, wantTail)
			}
			// stdin and stdout were the files themselves, not copies.
			if out, _ := os.ReadFile(stdout.Name()); string(out) != "from stdin\n" {
				t.Errorf("stdout file = %q, want the stdin contents", out)
			}
		})
	}
}

func openFile(t *testing.T, path, content string) *os.File {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		writes []string
		want   string
	}{
		{[]string{"ab"}, "ab"},
		{[]string{"ab", "cd"}, "abcd"},
		{[]string{"ab", "cde"}, "bcde"},
		{[]string{"abcdef"}, "cdef"},
		{[]string{"abc", "defgh", "i"}, "fghi"},
	}
	for _, tt := range tests {
		tl := newTail(4)
		for _, w := range tt.writes {
			tl.write([]byte(w))
		}
		if got := string(tl.bytes()); got != tt.want {
			t.Errorf("writes %q: tail = %q, want %q", tt.writes, got, tt.want)
		}
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cfg       Config
		startErr  bool
		wantCode  int
		wantError error
	}{
		{"name not in PATH", Config{Args: []string{"whimbrel-no-such-command"}}, true, ExitNotFound, nil},
		{"missing path", Config{Args: []string{filepath.Join(dir, "missing")}}, true, ExitNotFound, nil},
		{"not executable", Config{Args: []string{plain}}, true, ExitCannotExecute, nil},
		{"directory", Config{Args: []string{dir}}, true, ExitCannotExecute, nil},
		{"no command", Config{}, false, ExitWrapperError, ErrNoCommand},
		{"missing dir", Config{Args: []string{"true"}, Dir: filepath.Join(dir, "missing")}, false, ExitWrapperError, os.ErrNotExist},
	}
	if got := ExitCode(nil); got != 0 {
		t.Errorf("ExitCode(nil) = %d, want 0", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(tt.cfg)
			if err == nil {
				p.Close()
				t.Fatalf("Start succeeded, want an error")
			}
			var se *StartError
			if errors.As(err, &se) != tt.startErr {
				t.Errorf("error %v: is StartError = %v, want %v", err, !tt.startErr, tt.startErr)
			}
			if se != nil && se.ExitCode() != tt.wantCode {
				t.Errorf("StartError.ExitCode() = %d, want %d (%v)", se.ExitCode(), tt.wantCode, err)
			}
			if got := ExitCode(err); got != tt.wantCode {
				t.Errorf("ExitCode(%v) = %d, want %d", err, got, tt.wantCode)
			}
			if tt.wantError != nil && !errors.Is(err, tt.wantError) {
				t.Errorf("error %v is not %v", err, tt.wantError)
			}
		})
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		script     string
		grace      time.Duration
		wantSignal syscall.Signal
		minElapsed time.Duration
		maxElapsed time.Duration
	}{
		// The ready file is written once the shell is set up, so that
		// Stop cannot race its trap.
		{"exits on SIGTERM", `echo > "$1"; exec sleep 100`, 10 * time.Second, syscall.SIGTERM, 0, 5 * time.Second},
		{"ignores SIGTERM", `trap "" TERM; echo > "$1"; sleep 100`, 300 * time.Millisecond, syscall.SIGKILL, 300 * time.Millisecond, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ready := filepath.Join(t.TempDir(), "ready")
			p := start(t, Config{Args: []string{"sh", "-c", tt.script, "sh", ready}, KillGrace: tt.grace})
			readWhenWritten(t, ready)

			began := time.Now()
			if err := p.Stop("test stop"); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			elapsed := time.Since(began)
			res := wait(t, p)
			if elapsed < tt.minElapsed || elapsed > tt.maxElapsed {
				t.Errorf("Stop took %v, want between %v and %v", elapsed, tt.minElapsed, tt.maxElapsed)
			}
			if res.Signal != tt.wantSignal || res.ExitStatus() != 128+int(tt.wantSignal) {
				t.Errorf("got signal %v status %d, want %v", res.Signal, res.ExitStatus(), tt.wantSignal)
			}
			if !res.Stopped || res.StopReason != "test stop" {
				t.Errorf("Stopped = %v, StopReason = %q; want true, %q", res.Stopped, res.StopReason, "test stop")
			}
		})
	}
}

func TestStopReachesGrandchildren(t *testing.T) {
	t.Parallel()
	pidfile := filepath.Join(t.TempDir(), "pid")
	p := start(t, Config{
		Args:      []string{"sh", "-c", `sleep 100 & echo $! > "$1"; wait`, "sh", pidfile},
		KillGrace: 5 * time.Second,
	})
	grandchild := readWhenWritten(t, pidfile)
	if err := p.Stop("test stop"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if res := wait(t, p); res.Signal != syscall.SIGTERM {
		t.Errorf("child signal = %v, want SIGTERM", res.Signal)
	}
	waitGone(t, grandchild)
}

func TestStopIsIdempotent(t *testing.T) {
	t.Parallel()
	p := start(t, Config{Args: []string{"sleep", "100"}, KillGrace: 5 * time.Second})

	reasons := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		reason := fmt.Sprintf("caller %d", i)
		reasons[reason] = true
		wg.Go(func() { errs <- p.Stop(reason) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Stop: %v", err)
		}
	}
	res := wait(t, p)
	if !res.Stopped || !reasons[res.StopReason] {
		t.Errorf("Stopped = %v, StopReason = %q; want one of the callers' reasons", res.Stopped, res.StopReason)
	}
	if err := p.Stop("after exit"); err != nil {
		t.Errorf("Stop after exit: %v", err)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, ErrExited) {
		t.Errorf("Signal after exit = %v, want ErrExited", err)
	}
	for range 2 {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestStopAfterNaturalExit(t *testing.T) {
	t.Parallel()
	p := start(t, Config{Args: []string{"true"}})
	before := wait(t, p)
	if err := p.Stop("too late"); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if after, _ := p.Wait(); before.Stopped || after.Stopped {
		t.Errorf("Stopped = true for a child that exited by itself")
	}
}

// wrapperCommand runs the test binary in wrapper mode around args, with
// extra environment, optionally under a prefix such as unshare.
func wrapperCommand(t *testing.T, ctx context.Context, prefix []string, env []string, args ...string) (*exec.Cmd, *testbin.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string(nil), prefix...), self), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), envWrapper+"=1"), env...)
	stderr := &testbin.Buffer{}
	cmd.Stderr = stderr
	cmd.WaitDelay = time.Second
	return cmd, stderr
}

// waitGuarded waits until the wrapper says its guard knows the command's
// process group: killing it before then is the window between the fork and
// that line, in which the command is not guarded (see guard.go).
func waitGuarded(t *testing.T, stderr *testbin.Buffer) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !strings.Contains(stderr.String(), "guarded:") {
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper never said its command is guarded; stderr:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestForwardSignals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sig        syscall.Signal
		wantStatus int
	}{
		{syscall.SIGTERM, 143},
		{syscall.SIGHUP, 129},
		{syscall.SIGINT, 130},
	}
	for _, tt := range tests {
		t.Run(tt.sig.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			pidfile := filepath.Join(t.TempDir(), "pid")
			// The grandchild runs in the foreground: a non-interactive
			// shell starts background jobs with SIGINT ignored. The
			// trailing ":" stops the outer shell from exec'ing it away.
			script := `sh -c 'echo $$ > "$1"; exec sleep 100' sh "$1"; :`
			cmd, stderr := wrapperCommand(t, ctx, nil, nil, "sh", "-c", script, "sh", pidfile)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := readWhenWritten(t, pidfile)
			if err := cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if got := cmd.ProcessState.ExitCode(); got != tt.wantStatus {
				t.Errorf("wrapper exit status = %d (%v), want %d; stderr:\n%s", got, err, tt.wantStatus, stderr)
			}
			waitGone(t, grandchild)
		})
	}
}

// unshareArgs runs a command as PID 1 of a new PID namespace.
var unshareArgs = []string{"unshare", "--pid", "--fork", "--mount-proc"}

// unshareWorks reports whether unshareArgs can be used on this machine.
func unshareWorks() error {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, unshareArgs[0], append(unshareArgs[1:], "true")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func TestReapOrphans(t *testing.T) {
	t.Parallel()
	// Each sleep is started by a subshell that exits at once, so the sleeps
	// are orphaned while the main child exits with its own status.
	script := `(sleep 0.2 &); (sleep 0.3 &); exit 7`
	tests := []struct {
		name        string
		prefix      []string
		env         []string
		wantZombies int
		wantReaped  int
	}{
		{"subreaper", nil, []string{envReap + "=1"}, 0, 2},
		{"PID 1", unshareArgs, nil, 0, 2},
		// The control proves the check can fail: a subreaper that does
		// not reap is left with the orphans as zombies.
		{"subreaper without reaping", nil, []string{envSubreaperOnly + "=1"}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.prefix != nil {
				if err := unshareWorks(); err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("unshare is required under CI: %v", err)
					}
					t.Skipf("unshare unavailable: %v", err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			report := filepath.Join(t.TempDir(), "report")
			env := append([]string{envReport + "=" + report}, tt.env...)
			cmd, stderr := wrapperCommand(t, ctx, tt.prefix, env, "sh", "-c", script)
			err := cmd.Run()
			if got := cmd.ProcessState.ExitCode(); got != 7 {
				t.Fatalf("wrapper exit status = %d (%v), want 7; stderr:\n%s", got, err, stderr)
			}
			var status, zombies int
			if _, err := fmt.Sscan(readWhenWritten(t, report), &status, &zombies); err != nil {
				t.Fatalf("parse report: %v", err)
			}
			if status != 7 || zombies != tt.wantZombies {
				t.Errorf("report: status %d, zombies %d; want 7, %d; stderr:\n%s", status, zombies, tt.wantZombies, stderr)
			}
			reaped := len(regexp.MustCompile(`reaped orphan`).FindAllStringIndex(stderr.String(), -1))
			if reaped != tt.wantReaped {
				t.Errorf("reaped %d orphans, want %d; stderr:\n%s", reaped, tt.wantReaped, stderr)
			}
		})
	}
}
