package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
)

// TestLocalGuardsAWrapperThatLeaksThePipe: a wrapper that does not take the
// guard pipe (an older whimbrel-run given with --wrapper, here a shell
// script that speaks the guard's protocol but leaves the pipe to its
// command) is still guarded: once the wrapper has exited without releasing
// the guard, Local stops the command's process group although the command
// holds a copy of the pipe, and Wait returns.
func TestLocalGuardsAWrapperThatLeaksThePipe(t *testing.T) {
	t.Parallel()
	lb, pid := launchLeaky(t, "1s", "sleep", "300")
	lb.Signal(syscall.SIGKILL) // the wrapper's group: the script, not the command
	waited := make(chan struct{})
	go func() { defer close(waited); lb.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("Local.Wait did not return: the command's copy of the guard pipe keeps its guard waiting")
	}
	testbin.WaitEnded(t, pid, "(the command) outlived its wrapper, killed outright")
}

// TestWaitGuardsLetsAGuardFinish: a wrapper killed outright leaves its
// guard in the launcher stopping its command: SIGTERM, which this command
// ignores, then SIGKILL after the grace. WaitGuards (which Launcher.Run and
// Once call before they return, so before whimbrel-launcher exits) waits
// for that, so the SIGKILL is sent.
func TestWaitGuardsLetsAGuardFinish(t *testing.T) {
	t.Parallel()
	lb, pid := launchLeaky(t, "1500ms", "sh", "-c", `trap "" TERM; sleep 300 & wait; wait`)
	wrapperPID := 0
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
		f := strings.Fields(string(st)[strings.LastIndexByte(string(st), ')')+1:])
		wrapperPID, _ = strconv.Atoi(f[1])
	}
	if wrapperPID <= 1 {
		t.Fatalf("no wrapper found for the command %d", pid)
	}
	killed := time.Now()
	if err := syscall.Kill(wrapperPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for lb.Running() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the killed wrapper was not reaped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	lb.WaitGuards()
	if took := time.Since(killed); took < 1500*time.Millisecond {
		t.Errorf("WaitGuards returned %v after the wrapper's death, before the grace of 1.5s", took)
	}
	testbin.WaitEnded(t, pid, "(the command) ignores SIGTERM, and was not killed after the grace")
}

// launchLeaky launches command through a stand-in wrapper that speaks the
// guard's protocol (the command's process group and a grace of grace) but
// leaves the pipe to its command, as a whimbrel-run that ignores the
// guard pipe would; it returns the backend and the command's pid.
func launchLeaky(t *testing.T, grace string, command ...string) (*local.Backend, int) {
	t.Helper()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "leaky-wrapper")
	// setsid: the command gets a process group (and session) of its own,
	// as whimbrel-run gives it one.
	if err := os.WriteFile(script, []byte(`#!/bin/sh
shift 2
setsid "$@" &
echo "$! `+grace+`" >&3
echo $! > `+pidfile+`.tmp && mv `+pidfile+`.tmp `+pidfile+`
wait
`), 0o755); err != nil {
		t.Fatal(err)
	}
	lb := &local.Backend{Wrapper: script, LogDir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}}
	if _, err := lb.Launch(context.Background(), launcher.Job{
		Key:     state.ActivityKey{ActivityExecID: "a::" + filepath.Base(dir), WorkflowExecID: "w::" + filepath.Base(dir)},
		Command: command,
	}); err != nil {
		t.Fatal(err)
	}
	pid := testbin.PIDFile(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	return lb, pid
}
