package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// runIn runs `whimbrel run` in dir with env, to its end.
func runIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func example(t *testing.T, name string) string {
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunExample runs the example on the embedded store (the default) and
// on DynamoDB Local (WHIMBREL_STORE=dynamodb).
func TestRunExample(t *testing.T) {
	t.Parallel()
	stores := map[string][]string{
		"sqlite":   nil,
		"dynamodb": append(dynamotest.Env(t, dynamotest.Prefix(t)), "WHIMBREL_STORE=dynamodb"),
	}
	for name, env := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runIn(t, dir, env, example(t, "etl.yaml"))
			if code != 0 || !strings.Contains(out, "COMPLETED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, a := range []string{"extract", "transform-orders", "transform-customers", "transform-items", "load"} {
				if !strings.Contains(out, a) {
					t.Errorf("progress does not mention %s:\n%s", a, out)
				}
			}
			_, err := os.Stat(filepath.Join(dir, ".whimbrel", "state.db"))
			if (name == "sqlite") != (err == nil) {
				t.Errorf("embedded store file present: %v; want it only for the sqlite run", err == nil)
			}
		})
	}
}

func TestRunFailingExample(t *testing.T) {
	t.Parallel()
	out, errOut, code := runIn(t, t.TempDir(), nil, example(t, "failing.yaml"))
	for _, want := range []string{
		"FAILED in",
		"activity transform FAILED (exit code 3)",
		`orders.csv line 57: amount "12,5" is not a number`,
		"full log:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if code != 1 || t.Failed() {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestRunInterrupt: Ctrl-C cancels the workflow, stops its processes, and
// records the cancellation; nothing is left running.
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	def := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(def, []byte(`name: long
activities:
  slow:
    command: ["sh", "-c", "echo $$ > `+pidfile+`; exec sleep 300"]
  after:
    depends_on: [slow]
    command: ["true"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", def)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(pidfile); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the activity never started:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(pidfile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("whimbrel run ended with %v, want exit 1\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("whimbrel run did not stop after the interrupt:\n%s", out.String())
	}
	if err := syscall.Kill(pid, 0); err == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("the activity's process %d is still running", pid)
	}
	if !strings.Contains(out.String(), "interrupted") || !strings.Contains(out.String(), "CANCELLED") {
		t.Errorf("output:\n%s", out.String())
	}

	st, err := sqlite.Open(filepath.Join(dir, ".whimbrel", "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{State: state.WorkflowCancelled})
	if err != nil || len(wfs) != 1 {
		t.Fatalf("cancelled workflows: %v %v", wfs, err)
	}
	acts, err := st.Activities(context.Background(), wfs[0].WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		want := map[string]state.ActivityState{"slow": state.CancelledRunning, "after": state.Cancelled}[a.ActivityName]
		if a.State != want {
			t.Errorf("%s is %s, want %s", a.ActivityName, a.State, want)
		}
		if a.ActivityName == "slow" && (a.ExitCode == nil || a.EndTime.IsZero()) {
			t.Errorf("the stopped activity's exit was not recorded: %+v", *a)
		}
	}
}
