package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestStartWakesTheLauncher: on the embedded store, a start made by
// another process (whimbrel start, a rerun, a schedule's fire) wakes the
// launchers of the machine at once, in either mode of supervision: a
// launcher whose interval is an hour still starts a second workflow's
// activities within seconds of its start, once its own passes for the
// first are long over.
func TestStartWakesTheLauncher(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"process", "inline"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			db := filepath.Join(dir, "state.db")
			// The first workflow is there before the launcher: its first
			// pass, which every launcher makes at once, takes it.
			startWorkflow(t, db, "name: first\nactivities:\n  a:\n    command: [\"true\"]\n")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l := exec.CommandContext(ctx, binary, "--interval", "1h", "--types", "local", "--supervise", mode, "--log-dir", filepath.Join(dir, "logs"))
			l.Env = []string{"PATH=" + filepath.Dir(binary) + ":" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_STORE=sqlite:" + db, "WHIMBREL_LOG_LEVEL=debug"}
			out := &testbin.Buffer{}
			l.Stdout, l.Stderr = out, out
			if err := l.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Process.Kill(); _ = l.Wait() })
			waitAllCompleted(t, db, 1, out)
			// The passes the first workflow's end set off are over well
			// before the second starts; the next tick is an hour away.
			time.Sleep(2 * time.Second)
			startWorkflow(t, db, "name: second\nactivities:\n  a:\n    command: [\"true\"]\n  b:\n    command: [\"true\"]\n")
			waitAllCompleted(t, db, 2, out)

			// A launcher that stops withdraws its address.
			if err := l.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			_ = l.Wait()
			left, _ := os.ReadDir(db + "-wake/launchers")
			if len(left) != 0 {
				t.Errorf("a stopped launcher left its address: %v", left)
			}
		})
	}
}

// waitAllCompleted waits, for 60 seconds at most, until db holds n
// workflows and each is COMPLETED.
func waitAllCompleted(t *testing.T, db string, n int, out *testbin.Buffer) {
	t.Helper()
	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{})
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, wf := range wfs {
			if wf.State == state.WorkflowCompleted {
				done++
			}
		}
		if len(wfs) == n && done == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workflows COMPLETED after 60 s: a start did not wake the launcher\n%s", done, n, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
