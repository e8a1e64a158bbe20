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
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// runIn runs `whimbrel run` in dir with env, to its end.
func runIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return whimbrelIn(t, dir, env, append([]string{"run"}, args...)...)
}

// whimbrelIn runs whimbrel in dir with env added to a clean environment,
// to its end.
func whimbrelIn(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
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
	for name, env := range stores(t) {
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

// stores are the two places whimbrel run keeps its state in the tests: the
// embedded default, and DynamoDB Local.
func stores(t *testing.T) map[string][]string {
	return map[string][]string{
		"sqlite":   nil,
		"dynamodb": append(dynamotest.Env(t, dynamotest.Prefix(t)), "WHIMBREL_STORE=dynamodb"),
	}
}

// openStore opens what a run in dir with env wrote to.
func openStore(t *testing.T, dir string, env []string) state.Store {
	t.Helper()
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "WHIMBREL_TABLE_PREFIX="); ok {
			return dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: p, CallTimeout: dynamotest.CallTimeout})
		}
	}
	st, err := sqlite.Open(filepath.Join(dir, ".whimbrel", "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestRunFailingExample(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, errOut, code := runIn(t, t.TempDir(), env, example(t, "failing.yaml"))
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
		})
	}
}

func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunInterrupt: Ctrl-C cancels the workflow and stops its processes;
// a command that ignores SIGTERM is killed on a second Ctrl-C. The
// cancellation is recorded and nothing is left running: no command, no
// wrapper. With no --supervise the run supervises the activities itself
// (launched_as inline:PID, its own pid); with --supervise process a
// whimbrel-run each (pid:).
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	runs := map[string][]string{}
	for name, env := range stores(t) {
		runs[name] = env
	}
	runs["sqlite, process"] = nil
	for name, env := range runs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			slow, stubborn := filepath.Join(dir, "slow"), filepath.Join(dir, "stubborn")
			def := filepath.Join(dir, "long.yaml")
			if err := os.WriteFile(def, []byte(`name: long
activities:
  slow:
    command: ["sh", "-c", "echo $$ > `+slow+`; exec sleep 300"]
  stubborn:
    command: ["sh", "-c", "trap '' TERM; echo $$ > `+stubborn+`; while true; do sleep 1; done"]
  after:
    depends_on: [slow, stubborn]
    command: ["true"]
`), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"run", def}
			as := "" // set once the run has a pid
			if strings.HasSuffix(name, "process") {
				args, as = []string{"run", "--supervise", "process", def}, "pid:"
			}
			cmd := exec.Command(binary, args...)
			cmd.Dir = dir
			home := t.TempDir() // marks every process this run starts
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if as == "" {
				as = "inline:" + strconv.Itoa(cmd.Process.Pid)
			}
			pids := []int{readPIDFile(t, slow), readPIDFile(t, stubborn)}
			st := openStore(t, dir, env)
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			// The stubborn command ignores the first; a second Ctrl-C forces.
			select {
			case err := <-done:
				t.Fatalf("whimbrel run ended before the stubborn command did: %v\n%s", err, out.String())
			case <-time.After(2 * time.Second):
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
				t.Fatalf("whimbrel run did not stop after two interrupts:\n%s", out.String())
			}
			wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{State: state.WorkflowCancelled})
			if err != nil || len(wfs) != 1 {
				t.Fatalf("cancelled workflows: %v %v\n%s", wfs, err, out.String())
			}
			acts, err := st.Activities(context.Background(), wfs[0].WorkflowExecID)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				want := map[string]state.ActivityState{"slow": state.CancelledRunning, "stubborn": state.CancelledRunning, "after": state.Cancelled}[a.ActivityName]
				if a.State != want {
					t.Errorf("%s is %s, want %s", a.ActivityName, a.State, want)
				}
				if a.State == state.CancelledRunning && (a.ExitCode == nil || a.EndTime.IsZero()) {
					t.Errorf("%s: its exit was not recorded: %+v", a.ActivityName, *a)
				}
				if a.State == state.CancelledRunning && a.LaunchedAs != as && (as != "pid:" || !strings.HasPrefix(a.LaunchedAs, as)) {
					t.Errorf("%s was launched as %q, want %s", a.ActivityName, a.LaunchedAs, as)
				}
				if w, ok := strings.CutPrefix(a.LaunchedAs, "pid:"); ok {
					pid, _ := strconv.Atoi(w)
					pids = append(pids, pid)
				}
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("process %d is still running", pid)
				}
			}
			// Nor anything else the run started (a guard process), once
			// it has seen the run go.
			deadline := time.Now().Add(30 * time.Second)
			for left := startedWith(home); len(left) > 0; left = startedWith(home) {
				if time.Now().After(deadline) {
					for _, pid := range left {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					t.Errorf("processes %v the run started are still running", left)
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(out.String(), "interrupted") || !strings.Contains(out.String(), "forcing") {
				t.Errorf("output:\n%s", out.String())
			}
		})
	}
}

// startedWith lists the processes whose environment has HOME=home: those
// a run given that HOME started, and their children.
func startedWith(home string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(append([]byte{0}, b...), []byte("\x00HOME="+home+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestRunMaxRunning: --max-running 1 runs four independent activities one
// at a time (each takes a lock directory that a second one at the same
// time could not take, and fails then), and a negative cap is a usage
// error before anything starts.
func TestRunMaxRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock := filepath.Join(dir, "lock")
	def := "name: one-at-a-time\nactivities:\n"
	for _, a := range []string{"a", "b", "c", "d"} {
		def += "  " + a + ": {command: [sh, -c, 'mkdir " + lock + " && sleep 0.3 && rmdir " + lock + "']}\n"
	}
	file := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runIn(t, dir, nil, "--max-running", "1", file)
	if code != 0 || !strings.Contains(out, "COMPLETED in") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = runIn(t, dir, nil, "--max-running=-1", file)
	if code != 2 || !strings.Contains(errOut+out, "--max-running -1 is negative") {
		t.Errorf("a negative cap: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(out, "one-at-a-time::") {
		t.Errorf("a negative cap started the workflow:\n%s", out)
	}
}
