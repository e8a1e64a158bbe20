package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// runsIn reads the run log a flaky command appends to: one line per run,
// its start time in nanoseconds.
func runsIn(t *testing.T, path string) []time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []time.Time
	for _, l := range strings.Fields(string(b)) {
		ns, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("run log %s: %q", path, l)
		}
		out = append(out, time.Unix(0, ns))
	}
	return out
}

// TestRunRetries runs real processes under whimbrel run on both stores: a
// command that fails twice then succeeds runs 3 times, each retry no
// sooner than its delay (interval × backoff), the dependent once, and the
// workflow COMPLETES; a command that always fails runs max_attempts
// times, the dependent never, and the workflow FAILS; an exit code not
// listed in exit_codes is not retried.
func TestRunRetries(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			flaky, always, other, after, afterAlways := filepath.Join(dir, "flaky"), filepath.Join(dir, "always"),
				filepath.Join(dir, "other"), filepath.Join(dir, "after"), filepath.Join(dir, "after-always")
			// Each run appends its start; the flaky one fails while fewer
			// than 3 lines are there.
			record := func(log string) string { return `date +%s%N >> ` + log + `; ` }
			def := filepath.Join(dir, "retry.yaml")
			if err := os.WriteFile(def, []byte(`name: retried
defaults:
  retry: {max_attempts: 3, interval: 1s, backoff_rate: 2, jitter: none, exit_codes: [1]}
activities:
  flaky:
    command: ["sh", "-c", "`+record(flaky)+`test $(wc -l < `+flaky+`) -ge 3 || exit 1"]
  after:
    depends_on: [flaky]
    command: ["sh", "-c", "`+record(after)+`"]
`), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := runIn(t, dir, env, def)
			if code != 0 || !strings.Contains(out, "COMPLETED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			runs := runsIn(t, flaky)
			if len(runs) != 3 {
				t.Fatalf("flaky ran %d times, want 3", len(runs))
			}
			for i, want := range []time.Duration{time.Second, 2 * time.Second} {
				if gap := runs[i+1].Sub(runs[i]); gap < want {
					t.Errorf("run %d started %s after run %d, want at least the delay %s", i+2, gap, i+1, want)
				}
			}
			if n := len(runsIn(t, after)); n != 1 {
				t.Errorf("the dependent ran %d times, want 1", n)
			}

			def2 := filepath.Join(dir, "failing.yaml")
			if err := os.WriteFile(def2, []byte(`name: failing
defaults:
  retry: {max_attempts: 3, interval: 200ms, jitter: full, exit_codes: [1]}
activities:
  always:
    command: ["sh", "-c", "`+record(always)+`exit 1"]
  after:
    depends_on: [always]
    command: ["sh", "-c", "`+record(afterAlways)+`"]
  other:
    command: ["sh", "-c", "`+record(other)+`exit 2"]
`), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code = runIn(t, dir, env, def2)
			if code != 1 || !strings.Contains(out, "FAILED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if n := len(runsIn(t, always)); n != 3 {
				t.Errorf("always ran %d times, want max_attempts = 3", n)
			}
			if n := len(runsIn(t, other)); n != 1 {
				t.Errorf("exit 2 (not in exit_codes) ran %d times, want 1", n)
			}
			if n := len(runsIn(t, afterAlways)); n != 0 {
				t.Errorf("the dependent of what always fails ran %d times", n)
			}

			// whimbrel status shows the attempts, n of max, and the history.
			id := strings.Fields(strings.TrimPrefix(out, "workflow "))[0]
			storeEnv := env
			if name == "sqlite" {
				storeEnv = []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(dir, ".whimbrel", "state.db")}
			}
			status, errOut, code := whimbrel(t, storeEnv, "status", id)
			for _, want := range []string{"always FAILED after 3 of 3 attempts", "3 of 3", "attempt 1: FAILED (exit 1)", "attempt 2: FAILED (exit 1)"} {
				if !strings.Contains(status, want) {
					t.Errorf("status lacks %q", want)
				}
			}
			if code != 0 || t.Failed() {
				t.Fatalf("status: exit %d\n%s\n%s", code, status, errOut)
			}
		})
	}
}

// TestRunCancelDuringBackoff: Ctrl-C while a retry waits out its delay
// cancels the workflow; the retry never runs.
func TestRunCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "runs")
			def := filepath.Join(dir, "slow-retry.yaml")
			if err := os.WriteFile(def, []byte(`name: slow-retry
activities:
  flaky:
    command: ["sh", "-c", "date +%s%N >> `+log+`; exit 1"]
    retry: {max_attempts: 5, interval: 1h}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "run", def)
			cmd.Dir = dir
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
			var out testbin.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// Wait for the retry to be waiting: the first run is recorded
			// and the progress says when the next starts.
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(out.String(), "attempt 2 of 5, starts at") {
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("no retry waiting:\n%s", out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Errorf("whimbrel run ended with %v, want exit 1\n%s", err, out.String())
				}
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("whimbrel run did not stop:\n%s", out.String())
			}
			if n := len(runsIn(t, log)); n != 1 {
				t.Errorf("the command ran %d times, want once", n)
			}
			st := openStore(t, dir, env)
			wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{State: state.WorkflowCancelled})
			if err != nil || len(wfs) != 1 {
				t.Fatalf("cancelled workflows: %v %v\n%s", wfs, err, out.String())
			}
			acts, err := st.Activities(context.Background(), wfs[0].WorkflowExecID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[state.ActivityState]int{}
			for _, a := range acts {
				got[a.State]++
			}
			if len(acts) != 2 || got[state.Failed] != 1 || got[state.Cancelled] != 1 {
				t.Errorf("attempts %v, want the FAILED one and the CANCELLED retry", got)
			}
		})
	}
}
