//go:build linux

package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// alive reports whether pid runs (a zombie does not count).
func alive(pid string) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z"
}

// TestGuard kills the wrapper with SIGKILL, as an operator or the OOM killer
// would, and checks that its command and the command's own child stop: at
// once when they heed SIGTERM, after the grace when they ignore it. The
// control without a guard shows that they otherwise run on.
func TestGuard(t *testing.T) {
	t.Parallel()
	const grace = 1500 * time.Millisecond
	tests := []struct {
		name     string
		guard    bool
		trap     string
		minGone  time.Duration
		survives bool
	}{
		{"heeds SIGTERM", true, "", 0, false},
		{"ignores SIGTERM", true, `trap "" TERM;`, grace, false},
		{"no guard", false, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
			defer cancel()
			dir := t.TempDir()
			child, grandchild := filepath.Join(dir, "child"), filepath.Join(dir, "grandchild")
			var env []string
			if tt.guard {
				env = []string{envGuard + "=" + grace.String()}
			}
			script := tt.trap + ` sleep 100 & echo $! > "$2"; echo $$ > "$1"; wait`
			cmd, stderr := wrapperCommand(t, ctx, nil, env, "sh", "-c", script, "sh", child, grandchild)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pids := []string{readWhenWritten(t, child), readWhenWritten(t, grandchild)}
			t.Cleanup(func() {
				for _, pid := range pids {
					if n, err := strconv.Atoi(pid); err == nil {
						_ = syscall.Kill(n, syscall.SIGKILL)
					}
				}
			})
			if tt.guard {
				waitGuarded(t, stderr)
			}
			killed := time.Now()
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if tt.survives {
				time.Sleep(grace + 500*time.Millisecond)
				for _, pid := range pids {
					if !alive(pid) {
						t.Errorf("control: process %s stopped without a guard; the test cannot tell the guard works", pid)
					}
				}
				return
			}
			for _, pid := range pids {
				waitGone(t, pid)
			}
			if took := time.Since(killed); took < tt.minGone {
				t.Errorf("the group was gone %v after the wrapper's death, want at least the grace %v", took, tt.minGone)
			}
			if !strings.Contains(stderr.String(), "the wrapper died") {
				t.Errorf("the guard said nothing; stderr:\n%s", stderr)
			}
		})
	}
}

// TestGuardReleased checks that a wrapper closing normally releases its
// guard, which then neither signals anything nor lingers.
func TestGuardReleased(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd, stderr := wrapperCommand(t, ctx, nil, []string{envGuard + "=5s"}, "sh", "-c", "exit 4")
	err := cmd.Run()
	if got := cmd.ProcessState.ExitCode(); got != 4 {
		t.Fatalf("wrapper exit status = %d (%v), want 4; stderr:\n%s", got, err, stderr)
	}
	if strings.Contains(stderr.String(), "whimbrel runner guard") {
		t.Errorf("a released guard spoke; stderr:\n%s", stderr)
	}
}

// TestSignalChildOnly sends SIGUSR1 to the wrapper: relayed to the group it
// ends the command's child too (SIGUSR1's default action); relayed to the
// command alone (tini's default) that child runs on.
func TestSignalChildOnly(t *testing.T) {
	t.Parallel()
	for _, childOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("child only %v", childOnly), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
			defer cancel()
			grandchild := filepath.Join(t.TempDir(), "grandchild")
			var env []string
			if childOnly {
				env = []string{envChildOnly + "=1"}
			}
			// The shell handles USR1 (its children get the default
			// action), then waits again for its child.
			script := `trap ":" USR1; sleep 100 & echo $! > "$1"; wait; wait`
			cmd, stderr := wrapperCommand(t, ctx, nil, env, "sh", "-c", script, "sh", grandchild)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := readWhenWritten(t, grandchild)
			if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if got := alive(pid); got != childOnly {
				t.Errorf("the command's child alive = %v after SIGUSR1, want %v; stderr:\n%s", got, childOnly, stderr)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		})
	}
}

// sigMask parses a Sig* line of /proc/PID/status output.
func sigMask(t *testing.T, status, field string) uint64 {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return m
		}
	}
	t.Fatalf("no %s in:\n%s", field, status)
	return 0
}

// TestInheritedSignalConfiguration starts the wrapper with signals ignored
// and blocked, as tini's sigconf test does, and checks that its command
// inherits them.
func TestInheritedSignalConfiguration(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cmd, stderr := wrapperCommand(t, ctx, nil, []string{envSigconf + "=1"}, "cat", "/proc/self/status")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("wrapper: %v; stderr:\n%s", err, stderr)
	}
	bit := func(s syscall.Signal) uint64 { return 1 << (uint(s) - 1) }
	ign, blk := sigMask(t, out.String(), "SigIgn"), sigMask(t, out.String(), "SigBlk")
	for _, s := range []syscall.Signal{unix.SIGINT, unix.SIGHUP, unix.SIGTTOU} {
		if ign&bit(s) == 0 {
			t.Errorf("%v is not ignored in the command (SigIgn %016x)", s, ign)
		}
	}
	for _, s := range []syscall.Signal{unix.SIGUSR1, unix.SIGTTIN} {
		if blk&bit(s) == 0 {
			t.Errorf("%v is not blocked in the command (SigBlk %016x)", s, blk)
		}
	}
	if ign&bit(unix.SIGTERM) != 0 || blk&bit(unix.SIGTERM) != 0 {
		t.Errorf("SIGTERM ignored or blocked in the command, yet it was not in the wrapper (SigIgn %016x SigBlk %016x)", ign, blk)
	}
}

// TestDrainIsQuick checks that a descendant holding stderr open does not
// delay Wait by the drain timeout, and that what the command wrote just
// before exiting is still in the tail.
func TestDrainIsQuick(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	began := time.Now()
	p := start(t, Config{
		Args:   []string{"sh", "-c", `(sleep 5 &); printf last >&2; exit 0`},
		Stderr: &stderr,
	})
	res := wait(t, p)
	if took := time.Since(began); took > DefaultDrainTimeout/2 {
		t.Errorf("Wait took %v with a descendant holding stderr, want well under the drain timeout %v", took, DefaultDrainTimeout)
	}
	if string(res.StderrTail) != "last" || stderr.String() != "last" {
		t.Errorf("tail %q, passthrough %q; want %q", res.StderrTail, stderr.String(), "last")
	}
}

// TestTerminalHandover runs the wrapper on a terminal, as docker run -it
// does: its command must become the terminal's foreground process group, or
// reading the terminal stops it with SIGTTIN; and its stderr must be the
// terminal itself.
func TestTerminalHandover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	master, slave := testbin.OpenPTY(t)
	// After the command, the wrapper takes the terminal back: the test
	// binary in wrapper mode reports whose it is.
	script := `[ -t 2 ] && echo "stderr is a terminal"; read x; echo "got $x"`
	report := filepath.Join(t.TempDir(), "tty")
	cmd, _ := wrapperCommand(t, ctx, nil, []string{envTTYReport + "=" + report}, "sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	out := make(chan string, 1)
	go func() {
		var all []byte
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil || bytes.Contains(all, []byte("got hello")) {
				out <- string(all)
				return
			}
		}
	}()
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-out:
		if !strings.Contains(got, "got hello") {
			t.Errorf("the command did not read the terminal; output:\n%s", got)
		}
		if !strings.Contains(got, "stderr is a terminal") {
			t.Errorf("the command's stderr is not the terminal; output:\n%s", got)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the command did not read the terminal within 5 s (stopped by SIGTTIN?)")
		_ = cmd.Process.Kill()
	}
	_ = cmd.Wait()
	if whose := readWhenWritten(t, report); whose != "foreground" {
		t.Errorf("after the command, the terminal is the wrapper's %s, want foreground", whose)
	}
}

// TestWarnsWithoutReaping: a wrapper that is neither PID 1 nor a subreaper
// says that orphans will not be reaped, as tini does; a subreaper does not.
func TestWarnsWithoutReaping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		warn bool
	}{{nil, true}, {[]string{envReap + "=1"}, false}} {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		cmd, stderr := wrapperCommand(t, ctx, nil, tc.env, "true")
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("wrapper: %v\n%s", err, stderr)
		}
		if got := strings.Contains(stderr.String(), "not PID 1 and not a subreaper"); got != tc.warn {
			t.Errorf("env %v: warned = %v, want %v; stderr:\n%s", tc.env, got, tc.warn, stderr)
		}
	}
}

// TestSupervisorGuards hands the wrapper a guard pipe whose read end the
// test watches with Watch, as whimbrel-launcher does: no guard process is
// started, and when the wrapper is killed outright the supervisor stops the
// command and its child. When the supervisor goes away first, the wrapper
// starts a guard process in its place, which stops them all the same; when
// the wrapper closes normally, Watch returns without a word.
func TestSupervisorGuards(t *testing.T) {
	t.Parallel()
	const grace = 1500 * time.Millisecond
	for _, gone := range []string{"", "after the line", "before the wrapper starts"} {
		supervisorGone := gone != ""
		name := "supervisor gone " + gone
		if gone == "" {
			name = "supervisor guards"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
			defer cancel()
			dir := t.TempDir()
			child, grandchild := filepath.Join(dir, "child"), filepath.Join(dir, "grandchild")
			script := ` sleep 100 & echo $! > "$2"; echo $$ > "$1"; wait`
			cmd, stderr := wrapperCommand(t, ctx, nil, []string{envGuard + "=" + grace.String(), envGuardPipe + "=1"},
				"sh", "-c", script, "sh", child, grandchild)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.ExtraFiles = []*os.File{w}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			if gone == "before the wrapper starts" {
				r.Close() // most likely before the wrapper's Start looks
			}
			var said []string
			watched := make(chan error, 1)
			if !supervisorGone {
				go func() { watched <- Watch(r, func(msg string) { said = append(said, msg) }, nil) }()
			}
			pids := []string{readWhenWritten(t, child), readWhenWritten(t, grandchild)}
			t.Cleanup(func() {
				for _, pid := range pids {
					if n, err := strconv.Atoi(pid); err == nil {
						_ = syscall.Kill(n, syscall.SIGKILL)
					}
				}
			})
			waitGuarded(t, stderr)
			if n := testbin.GuardProcesses(t, cmd.Process.Pid); n != 0 && gone != "before the wrapper starts" {
				t.Errorf("%d guard processes run beside a supervisor's guard, want none", n)
			}
			if supervisorGone {
				r.Close() // the supervisor is gone: its end of the pipe closes
				// The wrapper says so once the guard process that replaces
				// the supervisor has the process group.
				deadline := time.Now().Add(waitTimeout)
				for !strings.Contains(stderr.String(), "started a guard process") {
					if time.Now().After(deadline) {
						t.Fatalf("no guard process replaced the supervisor; stderr:\n%s", stderr)
					}
					time.Sleep(20 * time.Millisecond)
				}
				if n := testbin.GuardProcesses(t, cmd.Process.Pid); n != 1 {
					t.Fatalf("%d guard processes replaced the supervisor, want 1; stderr:\n%s", n, stderr)
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			for _, pid := range pids {
				waitGone(t, pid)
			}
			if supervisorGone {
				if !strings.Contains(stderr.String(), "the wrapper died") {
					t.Errorf("the replacing guard said nothing; stderr:\n%s", stderr)
				}
				return
			}
			select {
			case err := <-watched:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("Watch did not return after the group was stopped")
			}
			if len(said) == 0 || !strings.Contains(said[0], "the wrapper died") {
				t.Errorf("the supervisor's guard said %q", said)
			}
		})
	}
	t.Run("released", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		cmd, stderr := wrapperCommand(t, ctx, nil, []string{envGuard + "=5s", envGuardPipe + "=1"}, "sh", "-c", "exit 4")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.ExtraFiles = []*os.File{w}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		var said []string
		werr := Watch(r, func(msg string) { said = append(said, msg) }, nil)
		err = cmd.Wait()
		if got := cmd.ProcessState.ExitCode(); got != 4 {
			t.Fatalf("wrapper exit status = %d (%v), want 4; stderr:\n%s", got, err, stderr)
		}
		if werr != nil || len(said) > 0 {
			t.Errorf("a released supervisor's guard returned %v and said %q", werr, said)
		}
	})
}

// TestGuardPipeFD: only the write end of a pipe, and never standard input,
// output or error, is taken as a supervisor's guard pipe. The descriptors
// are raw ones, owned by no *os.File but the one GuardPipeFD returns.
func TestGuardPipeFD(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	file, err := unix.Open(filepath.Join(t.TempDir(), "file"), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(file) })
	unix.CloseOnExec(p[1])
	for _, tt := range []struct {
		name string
		fd   int
		ok   bool
	}{
		{"a pipe's read end", p[0], false},
		{"a file", file, false},
		{"stdout", 1, false},
		{"closed", 1 << 20, false},
		{"a pipe's write end", p[1], true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ok {
				// Not close-on-exec yet: GuardPipeFD makes it so.
				if _, err := unix.FcntlInt(uintptr(tt.fd), unix.F_SETFD, 0); err != nil {
					t.Fatal(err)
				}
			}
			got, err := GuardPipeFD(tt.fd)
			if tt.ok != (err == nil) {
				t.Fatalf("GuardPipeFD(%d) = %v, %v; want ok=%v", tt.fd, got, err, tt.ok)
			}
			if err != nil {
				return
			}
			defer got.Close() // it owns the descriptor now
			flags, ferr := unix.FcntlInt(uintptr(tt.fd), unix.F_GETFD, 0)
			if ferr != nil || flags&unix.FD_CLOEXEC == 0 {
				t.Errorf("descriptor %d is not close-on-exec (%v)", tt.fd, ferr)
			}
		})
	}
}

// TestFailedStartClosesGuardPipe: a command that cannot start closes the
// guard pipe it was given, so the supervisor's guard returns at once:
// whether Start fails before a guard takes the pipe (not found on PATH) or
// after (exec fails).
func TestFailedStartClosesGuardPipe(t *testing.T) {
	for _, command := range []string{"no-such-command-whimbrel", "/no/such/command"} {
		t.Run(command, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := Start(Config{Args: []string{command}, Guard: true, GuardPipe: w}); err == nil {
				t.Fatal("a missing command started")
			}
			done := make(chan error, 1)
			go func() { done <- Watch(r, func(msg string) { t.Errorf("the guard said %q", msg) }, nil) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(waitTimeout):
				t.Fatal("the guard pipe was left open: the supervisor's guard waits for ever")
			}
		})
	}
}
