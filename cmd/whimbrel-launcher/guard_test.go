package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestLauncherGuardsItsWrappers: a local launcher is its wrappers' guard,
// so no wrapper it starts runs a guard process, and a wrapper killed
// outright (kill -9) still has its command and the command's child stopped
// (by the launcher). When the launcher is killed first, the wrapper starts a
// guard process in its place, which stops them when the wrapper is killed
// in turn.
func TestLauncherGuardsItsWrappers(t *testing.T) {
	t.Parallel()
	for _, launcherDiesFirst := range []bool{false, true} {
		name := "launcher guards"
		if launcherDiesFirst {
			name = "launcher killed first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "state.db")
			child, grandchild := filepath.Join(dir, "child"), filepath.Join(dir, "grandchild")
			startWorkflow(t, db, `name: guarded
activities:
  a:
    kill_grace: 2s
    command: [sh, -c, 'sleep 300 & echo $! > `+grandchild+`.tmp; mv `+grandchild+`.tmp `+grandchild+`; echo $$ > `+child+`.tmp; mv `+child+`.tmp `+child+`; wait']
`)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l := exec.CommandContext(ctx, binary, "--interval", "100ms", "--types", "local", "--log-dir", filepath.Join(dir, "logs"))
			// Debug: the wrappers say in their logs when their command is
			// guarded (the launcher hands them its environment).
			l.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_STORE=sqlite:" + db, "WHIMBREL_LOG_LEVEL=debug"}
			out := &testbin.Buffer{}
			l.Stdout, l.Stderr = out, out
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
			pids := []int{testbin.PIDFile(t, child), testbin.PIDFile(t, grandchild)}
			t.Cleanup(func() {
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			wrapper := parentOf(t, pids[0])
			t.Cleanup(func() { _ = syscall.Kill(wrapper, syscall.SIGKILL) })
			// Killed before it has told its guard the process group (the
			// window between the fork and that line), the command would
			// run on: wait until it says the command is guarded.
			logs := filepath.Join(dir, "logs")
			waitLogged(t, logs, "guarded:")
			if n := testbin.GuardProcesses(t, wrapper); n != 0 {
				t.Fatalf("the wrapper under a launcher runs %d guard processes, want none", n)
			}
			if launcherDiesFirst {
				_ = l.Process.Kill()
				_ = l.Wait()
				waitLogged(t, logs, "started a guard process")
				if n := testbin.GuardProcesses(t, wrapper); n != 1 {
					t.Fatalf("%d guard processes took over from the killed launcher, want 1\n%s", n, out.String())
				}
			}
			if err := syscall.Kill(wrapper, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for _, pid := range pids {
				testbin.WaitEnded(t, pid, "outlived its wrapper, killed outright\n"+out.String())
			}
			if !launcherDiesFirst && !strings.Contains(out.String(), "the wrapper died") {
				t.Errorf("the launcher did not say what it did:\n%s", out.String())
			}
		})
	}
}

func startWorkflow(t *testing.T, db, yaml string) {
	t.Helper()
	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("guarded.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"}); err != nil {
		t.Fatal(err)
	}
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	_, ppid, ok := testbin.Stat(pid)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return ppid
}

// waitLogged waits until an activity's log in dir says what.
func waitLogged(t *testing.T, dir, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), what) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no activity log in %s says %q", dir, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
