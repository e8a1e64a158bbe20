package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// startRun starts `whimbrel run` in dir with env.
func startRun(t *testing.T, dir string, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// exitOf waits, bounded, for a started command's exit code.
func exitOf(t *testing.T, cmd *exec.Cmd, out *bytes.Buffer) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(120 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("whimbrel run did not end within 2 minutes:\n%s", out.String())
	}
	return -1
}

// TestRunBranchingExample runs examples/branching.yaml on both stores:
// the skipped branch shows as SKIPPED, the one_failed page is cancelled
// by its rule, the finally activities get the outcome.
func TestRunBranchingExample(t *testing.T) {
	t.Parallel()
	example, err := filepath.Abs("../../examples/branching.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cmd, out := startRun(t, dir, env, example, "--param", "changed=false")
			if code := exitOf(t, cmd, out); code != 0 {
				t.Fatalf("exit %d\n%s", code, out.String())
			}
			for _, want := range []string{"rebuild", "SKIPPED", "CANCELLED (rule)", "announce", "COMPLETED"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the run's view does not show %q:\n%s", want, out.String())
				}
			}
			st := openStore(t, dir, env)
			wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{Name: "branching"})
			if err != nil || len(wfs) != 1 {
				t.Fatalf("workflows: %v %v", wfs, err)
			}
			status, _, _ := whimbrelIn(t, dir, env, "status", wfs[0].WorkflowExecID)
			for _, want := range []string{"SKIPPED", "CANCELLED (rule)", "COMPLETED (finally)", `when "outputs.check.changed && params.mode != 'dry-run'" is false`} {
				if !strings.Contains(status, want) {
					t.Errorf("status does not show %q:\n%s", want, status)
				}
			}
		})
	}
}

// TestRunFinallyAfterInterrupt: Ctrl-C on whimbrel run cancels the
// workflow, and its finally activity runs with WHIMBREL_WORKFLOW_STATE
// CANCELLED before the run ends. Supervised inline (the default), the
// finally activity is claimed with the workflow item the launcher read
// before the outcome was decided, and must still see the outcome.
func TestRunFinallyAfterInterrupt(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pid, seen := filepath.Join(dir, "pid"), filepath.Join(dir, "seen")
			def := filepath.Join(dir, "sleepy.yaml")
			if err := os.WriteFile(def, []byte(`name: sleepy
activities:
  long: {command: ["sh", "-c", "echo $$ > `+pid+`; exec sleep 300"]}
  after: {command: ["true"], depends_on: [long]}
finally:
  cleanup: {command: ["sh", "-c", "echo \"$WHIMBREL_WORKFLOW_STATE {{ workflow.state }}\" > `+seen+`"]}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd, out := startRun(t, dir, env, def)
			readPIDFile(t, pid)
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
			if code := exitOf(t, cmd, out); code != 1 {
				t.Errorf("exit %d after Ctrl-C; want 1\n%s", code, out.String())
			}
			if b, err := os.ReadFile(seen); err != nil || string(b) != "CANCELLED CANCELLED\n" {
				t.Errorf("the finally activity saw %q (%v); want the state CANCELLED in its env and its template\n%s", b, err, out.String())
			}
			st := openStore(t, dir, env)
			wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{State: state.WorkflowCancelled})
			if err != nil || len(wfs) != 1 {
				t.Fatalf("cancelled workflows: %v %v\n%s", wfs, err, out.String())
			}
		})
	}
}

// TestRunFinallyAfterKill9: the wrapper of the last activity is killed
// outright (kill -9) before it records its outcome or settles anything;
// the monitor finishes the activity, decides the outcome and starts the
// finally activity, which sees FAILED and the activity's name. The
// activities have wrappers (--supervise process): inline, the command's
// parent is whimbrel run itself.
func TestRunFinallyAfterKill9(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			seen := filepath.Join(dir, "seen")
			def := filepath.Join(dir, "killed.yaml")
			if err := os.WriteFile(def, []byte(`name: killed
activities:
  victim:
    heartbeat_interval: 1s
    heartbeat_timeout: 3s
    command: ["sh", "-c", "kill -9 $PPID; sleep 5"]
finally:
  cleanup: {command: ["sh", "-c", "echo $WHIMBREL_WORKFLOW_STATE > `+seen+`; cat $WHIMBREL_INPUTS >> `+seen+`"]}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd, out := startRun(t, dir, env, "--supervise", "process", def)
			if code := exitOf(t, cmd, out); code != 1 {
				t.Errorf("exit %d; want 1 (the workflow FAILED)\n%s", code, out.String())
			}
			b, err := os.ReadFile(seen)
			if err != nil || !strings.HasPrefix(string(b), "FAILED\n") || !strings.Contains(string(b), `"failed":["victim"]`) {
				t.Errorf("the finally activity saw %q (%v); want FAILED and victim among the failed\n%s", b, err, out.String())
			}
		})
	}
}

// TestControlDefinitionErrors: a bad when, an unknown rule and a finally
// activity that waits on the workflow's are reported together with their
// lines, exit 2, and nothing is written.
func TestControlDefinitionErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(def, []byte(`name: bad
params:
  mode: {default: run}
activities:
  a: {command: ["true"]}
  b:
    depends_on: [a]
    when: "outputs.a.x +"
    command: ["true"]
  c:
    trigger_rule: one_faild
    when: "params.mode"
    command: ["true"]
  d:
    when: "params.nope == 'x' && outputs.a.y"
    command: ["true"]
finally:
  e: {command: ["true"], depends_on: [a]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := whimbrelIn(t, dir, nil, "run", def)
	if code != 2 {
		t.Errorf("exit %d; want 2", code)
	}
	for _, want := range []string{
		`bad.yaml:8: activity "b": when "outputs.a.x +": unexpected token EOF`,
		`bad.yaml:10: activity "c": trigger_rule "one_faild" is not known`,
		`(did you mean "one_failed"?)`,
		`bad.yaml:12: activity "c": when "params.mode": expected bool, but got string`,
		`bad.yaml:15: activity "d": when "params.nope == 'x' && outputs.a.y": params.nope names a parameter the workflow does not declare`,
		`outputs.a names "a", which is not in its depends_on`,
		`bad.yaml:18: finally activity "e" depends on a, of the workflow's activities`,
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the errors do not say %q:\n%s", want, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".whimbrel", "state.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a store was written for a definition that does not run: %v", err)
	}
}
