package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestInlineLauncherKilledStopsItsCommands: a launcher that supervises
// its local activities inline runs one guard process for all of them, and
// when it is killed outright (kill -9) the guard stops every command it
// started, and their children, in their process groups. The activities are
// left RUNNING with heartbeats that stopped: the monitor times them out.
func TestInlineLauncherKilledStopsItsCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	var files []string
	yaml := "name: guarded\nactivities:\n"
	for _, name := range []string{"a", "b"} {
		child, grandchild := filepath.Join(dir, name+"-child"), filepath.Join(dir, name+"-grandchild")
		files = append(files, child, grandchild)
		yaml += `  ` + name + `:
    kill_grace: 2s
    heartbeat_interval: 1s
    heartbeat_timeout: 3s
    command: [sh, -c, 'sleep 300 & echo $! > ` + grandchild + `.tmp; mv ` + grandchild + `.tmp ` + grandchild + `; echo $$ > ` + child + `.tmp; mv ` + child + `.tmp ` + child + `; wait']
`
	}
	startWorkflow(t, db, yaml)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := filepath.Join(dir, "logs")
	// No whimbrel-run anywhere: the launcher must not need one.
	l := exec.CommandContext(ctx, binary, "--interval", "100ms", "--types", "local", "--supervise", "inline", "--wrapper", "/nonexistent/whimbrel-run", "--log-dir", logs)
	l.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_STORE=sqlite:" + db, "WHIMBREL_LOG_LEVEL=debug"}
	out := &testbin.Buffer{}
	l.Stdout, l.Stderr = out, out
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
	var pids []int
	for _, f := range files {
		pids = append(pids, testbin.PIDFile(t, f))
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	for i := 0; i < len(pids); i += 2 {
		if ppid := parentOf(t, pids[i]); ppid != l.Process.Pid {
			t.Fatalf("command %d's parent is %d, not the launcher %d: a wrapper process ran it", pids[i], ppid, l.Process.Pid)
		}
	}
	// Killed before it has told the guard a process group (the window
	// between the fork and that line), a command would run on.
	waitLoggedN(t, logs, "guarded:", 2)
	if n := groupGuards(t, l.Process.Pid); n != 1 {
		t.Fatalf("the launcher runs %d group guard processes, want 1\n%s", n, out.String())
	}
	if err := l.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = l.Wait()
	for _, pid := range pids {
		testbin.WaitEnded(t, pid, "outlived its launcher, killed outright\n"+out.String())
	}

	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := monitor.New(st, monitor.Config{Now: func() time.Time { return time.Now().Add(time.Minute) }})
	if _, err := m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{})
	if err != nil || len(wfs) != 1 {
		t.Fatalf("workflows: %v %v", wfs, err)
	}
	acts, err := st.Activities(ctx, wfs[0].WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.State != state.TimedOut {
			t.Errorf("%s: %s (%s), want TIMED_OUT once its launcher was killed", a.ActivityName, a.State, a.Reason)
		}
	}
}

// groupGuards counts pid's children that are group guard processes.
func groupGuards(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := testbin.Stat(p); !ok || ppid != pid {
			continue
		}
		if argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(argv), "whimbrel-group-guard\x00") {
			n++
		}
	}
	return n
}

// waitLoggedN waits until n activity logs in dir say what.
func waitLoggedN(t *testing.T, dir, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		got := 0
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), what) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d activity logs in %s say %q, want %d", got, dir, what, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInlineLauncherStoppedRecordsItsActivities: a launcher that
// supervises inline and is told to stop (SIGTERM) stops its commands as a
// docker stop would and records their outcome before it exits.
func TestInlineLauncherStoppedRecordsItsActivities(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	child := filepath.Join(dir, "child")
	startWorkflow(t, db, `name: stopped
activities:
  a:
    kill_grace: 2s
    command: [sh, -c, 'echo $$ > `+child+`.tmp; mv `+child+`.tmp `+child+`; exec sleep 300']
`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := exec.CommandContext(ctx, binary, "--interval", "100ms", "--types", "local", "--supervise", "inline", "--log-dir", filepath.Join(dir, "logs"))
	l.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_STORE=sqlite:" + db}
	out := &testbin.Buffer{}
	l.Stdout, l.Stderr = out, out
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
	pid := testbin.PIDFile(t, child)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := l.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(); err != nil {
		t.Fatalf("the launcher exited with %v\n%s", err, out.String())
	}
	if testbin.Alive(pid) {
		t.Fatalf("the command outlived its stopped launcher\n%s", out.String())
	}
	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{})
	if err != nil || len(wfs) != 1 {
		t.Fatalf("workflows: %v %v", wfs, err)
	}
	acts, err := st.Activities(ctx, wfs[0].WorkflowExecID)
	if err != nil || len(acts) != 1 || acts[0].State != state.Failed || !strings.Contains(acts[0].Reason, "SIGTERM") {
		t.Fatalf("activities %+v %v: want FAILED, killed by SIGTERM\n%s", acts[0], err, out.String())
	}
}
