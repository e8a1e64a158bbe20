//go:build linux

package process

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// The test binary doubles as a wrapper: when envWrapper is set, TestMain runs
// wrapperMain with os.Args[1:] as the command instead of the tests. This gives
// end-to-end tests a real process to signal, to run as PID 1, and to make a
// subreaper, without touching the test process itself.
const (
	envWrapper = "RUNNER_TEST_WRAPPER"
	// envReap sets Config.Reap.
	envReap = "RUNNER_TEST_REAP"
	// envSubreaperOnly makes the wrapper a subreaper without reaping, as a
	// control that orphans really do become the wrapper's zombies.
	envSubreaperOnly = "RUNNER_TEST_SUBREAPER_ONLY"
	// envGuard sets Config.Guard, with a kill grace of envGuard's value.
	envGuard = "RUNNER_TEST_GUARD"
	// envGuardPipe makes fd 3, which the test hands the wrapper, the
	// Config.GuardPipe of its guard (envGuard must be set too): the test
	// is the supervisor that guards.
	envGuardPipe = "RUNNER_TEST_GUARD_PIPE"
	// envKillAfterTerm sets Config.KillAfterTerm, with a kill grace of
	// envKillAfterTerm's value.
	envKillAfterTerm = "RUNNER_TEST_KILL_AFTER_TERM"
	// envChildOnly sets Config.SignalChildOnly.
	envChildOnly = "RUNNER_TEST_CHILD_ONLY"
	// envSigconf makes TestMain ignore SIGINT, SIGHUP and SIGTTOU, block
	// SIGUSR1 and SIGTTIN, and exec itself as the wrapper: a start with an
	// inherited signal configuration, as tini's sigconf test does.
	envSigconf = "RUNNER_TEST_SIGCONF"
	// envTTYReport names a file that receives "foreground" or
	// "background": whose the terminal on stdin is once the child exited.
	envTTYReport = "RUNNER_TEST_TTY_REPORT"
	// envReport names a file that receives "<exit status> <zombies>" once
	// the wrapper's remaining children have settled.
	envReport = "RUNNER_TEST_REPORT"
)

// Settling bounds for the wrapper's report.
const (
	// settleLive bounds the wait for orphans to finish running.
	settleLive = 5 * time.Second
	// settleZombies bounds the wait for zombies to be reaped; it exceeds
	// reapInterval so that even the fallback tick has a chance to run.
	settleZombies = reapInterval + 500*time.Millisecond
)

func wrapperMain() int {
	logger := hclog.New(&hclog.LoggerOptions{Name: "wrapper", Output: os.Stderr, Level: hclog.Debug})
	if os.Getenv(envSubreaperOnly) == "1" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			logger.Error("become subreaper", "error", err)
			return ExitWrapperError
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RUNNER_TEST_") {
			env = append(env, kv)
		}
	}
	var grace time.Duration
	if v := os.Getenv(envGuard); v != "" {
		var err error
		if grace, err = time.ParseDuration(v); err != nil {
			logger.Error("bad "+envGuard, "error", err)
			return ExitWrapperError
		}
	}
	guard := grace > 0
	if v := os.Getenv(envKillAfterTerm); v != "" {
		var err error
		if grace, err = time.ParseDuration(v); err != nil {
			logger.Error("bad "+envKillAfterTerm, "error", err)
			return ExitWrapperError
		}
	}
	var guardPipe *os.File
	if os.Getenv(envGuardPipe) == "1" {
		unix.CloseOnExec(3)
		guardPipe = os.NewFile(3, "guard pipe")
	}
	p, err := Start(Config{
		Args:            os.Args[1:],
		Env:             env,
		ForwardSignals:  true,
		KillAfterTerm:   os.Getenv(envKillAfterTerm) != "",
		SignalChildOnly: os.Getenv(envChildOnly) == "1",
		Guard:           guard,
		GuardPipe:       guardPipe,
		KillGrace:       grace,
		Reap:            os.Getenv(envReap) == "1",
		Logger:          logger,
	})
	if err != nil {
		logger.Error("start", "error", err)
		return ExitCode(err)
	}
	defer p.Close()
	res, err := p.Wait()
	if err != nil {
		logger.Error("wait", "error", err)
	}
	if path := os.Getenv(envTTYReport); path != "" {
		whose := "background"
		if fg, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && fg == unix.Getpgrp() {
			whose = "foreground"
		}
		if err := os.WriteFile(path, []byte(whose+"\n"), 0o644); err != nil {
			logger.Error("write tty report", "error", err)
			return ExitWrapperError
		}
	}
	if path := os.Getenv(envReport); path != "" {
		report := fmt.Sprintf("%d %d\n", res.ExitStatus(), settledZombies())
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			logger.Error("write report", "error", err)
			return ExitWrapperError
		}
	}
	return res.ExitStatus()
}

// sigconfMain sets up an inherited signal configuration and execs this
// binary as the wrapper, with the same arguments.
func sigconfMain() int {
	runtime.LockOSThread() // the mask is the thread's, and exec keeps it
	signal.Ignore(unix.SIGINT, unix.SIGHUP, unix.SIGTTOU)
	var set unix.Sigset_t
	for _, s := range []unix.Signal{unix.SIGUSR1, unix.SIGTTIN} {
		set.Val[(s-1)/64] |= 1 << ((uint(s) - 1) % 64)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		fmt.Fprintln(os.Stderr, "block signals:", err)
		return ExitWrapperError
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return ExitWrapperError
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envSigconf+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(self, os.Args, append(env, envWrapper+"=1"))
	fmt.Fprintln(os.Stderr, "exec:", err)
	return ExitWrapperError
}

// settledZombies waits for this process's children to stop running and to
// be reaped, then returns how many are left as zombies.
func settledZombies() int {
	deadline := time.Now().Add(settleLive)
	for time.Now().Before(deadline) {
		if live, _ := children(os.Getpid()); live == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(settleZombies)
	for {
		_, zombies := children(os.Getpid())
		if zombies == 0 || time.Now().After(deadline) {
			return zombies
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// children counts the running and zombie children of ppid from /proc.
func children(ppid int) (live, zombies int) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		state, parent, ok := procStat(e.Name())
		if !ok || parent != ppid {
			continue
		}
		if state == "Z" {
			zombies++
		} else {
			live++
		}
	}
	return live, zombies
}

// procStat reads the state and parent of a process from /proc/<pid>/stat.
func procStat(pid string) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The command name is parenthesised and may itself hold spaces or
	// parentheses, so the fields are taken after its last ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}
