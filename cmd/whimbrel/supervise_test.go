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
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// The commands that run a workflow in the foreground on this machine
// (whimbrel run, and start and rerun on the embedded store) supervise its
// activities in their own process unless told otherwise: their Ctrl-C
// stops the activities anyway. --supervise wins over WHIMBREL_SUPERVISE,
// which wins over the default.

// superviseWorkflow has two activities in a chain, so that the second is
// launched by the hand-off or the listing after the first one's advance.
const superviseWorkflow = `name: supervised
activities:
  first: {command: ["true"]}
  second: {depends_on: [first], command: ["sh", "-c", "echo done"]}
`

// runPID runs whimbrel with args in dir, with env added to a clean
// environment, to its end (within three minutes), and returns its pid and
// exit code.
func runPID(t *testing.T, dir string, env []string, args ...string) (pid, code int, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return cmd.Process.Pid, code, b.String()
}

// newCompleted returns the completed execution of st not in seen, and
// adds it there.
func newCompleted(t *testing.T, st state.Store, seen map[string]bool) *state.WorkflowExec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{State: state.WorkflowCompleted})
	if err != nil {
		t.Fatal(err)
	}
	var found *state.WorkflowExec
	for _, wf := range wfs {
		if !seen[wf.WorkflowExecID] {
			if found != nil {
				t.Fatalf("two new completed executions: %s and %s", found.WorkflowExecID, wf.WorkflowExecID)
			}
			found = wf
		}
	}
	if found == nil {
		t.Fatalf("no new completed execution among %d", len(wfs))
	}
	seen[found.WorkflowExecID] = true
	return found
}

// checkLaunchedAs checks that every activity of execution id was launched
// as want says: "inline:PID" (supervised in process PID) or "pid:" (a
// whimbrel-run process each).
func checkLaunchedAs(t *testing.T, st state.Store, id, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acts, err := st.Activities(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 2 {
		t.Fatalf("%s has %d activities, want 2", id, len(acts))
	}
	for _, a := range acts {
		ok := a.LaunchedAs == want
		if want == "pid:" {
			_, err := strconv.Atoi(strings.TrimPrefix(a.LaunchedAs, "pid:"))
			ok = strings.HasPrefix(a.LaunchedAs, "pid:") && err == nil
		}
		if !ok || a.State != state.Completed {
			t.Errorf("%s of %s: %s, launched as %q; want COMPLETED, launched as %s", a.ActivityName, id, a.State, a.LaunchedAs, want)
		}
	}
}

// TestForegroundRunsSuperviseInlineByDefault: on the embedded store,
// whimbrel run, start and rerun with neither --supervise nor
// WHIMBREL_SUPERVISE record launched_as inline:PID with their own pid;
// WHIMBREL_SUPERVISE=process starts a whimbrel-run each (pid:), and
// --supervise overrides the variable either way.
func TestForegroundRunsSuperviseInlineByDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(superviseWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	st := openStoreAfter(t, dir)
	seen := map[string]bool{}
	var first string
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // "inline" (this pid) or "pid:"
	}{
		{"run", nil, []string{"run", "w.yaml"}, "inline"},
		{"run, WHIMBREL_SUPERVISE=process", []string{"WHIMBREL_SUPERVISE=process"}, []string{"run", "w.yaml"}, "pid:"},
		{"run --supervise process", nil, []string{"run", "--supervise", "process", "w.yaml"}, "pid:"},
		{"start", nil, []string{"start", "w.yaml"}, "inline"},
		{"start --supervise inline over WHIMBREL_SUPERVISE=process", []string{"WHIMBREL_SUPERVISE=process"}, []string{"start", "--supervise", "inline", "w.yaml"}, "inline"},
		{"rerun", nil, []string{"rerun", "FIRST"}, "inline"},
		{"rerun --supervise process over WHIMBREL_SUPERVISE=inline", []string{"WHIMBREL_SUPERVISE=inline"}, []string{"rerun", "--supervise=process", "FIRST"}, "pid:"},
	} {
		for i, a := range c.args {
			if a == "FIRST" {
				c.args[i] = first
			}
		}
		pid, code, out := runPID(t, dir, c.env, c.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", c.name, code, out)
		}
		wf := newCompleted(t, st(), seen)
		if first == "" {
			first = wf.WorkflowExecID
		}
		want := c.want
		if want == "inline" {
			want = "inline:" + strconv.Itoa(pid)
		}
		t.Run(c.name, func(t *testing.T) { checkLaunchedAs(t, st(), wf.WorkflowExecID, want) })
	}
}

// openStoreAfter opens the embedded store of dir once the first command
// has created it.
func openStoreAfter(t *testing.T, dir string) func() state.Store {
	var st state.Store
	return func() state.Store {
		if st == nil {
			st = openStore(t, dir, nil)
		}
		return st
	}
}

// TestRunSupervisesInlineByDefaultBehindFaults: on DynamoDB behind the
// fault proxy (throttling, errors after a write applied, an index that
// lags), whimbrel run with no --supervise supervises inline too.
func TestRunSupervisesInlineByDefaultBehindFaults(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{IndexLag: 300 * time.Millisecond, Throttle: 0.02, Errors: 0.02, AfterWrite: 0.5})
	st := dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(superviseWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, code, out := runPID(t, dir, proxy.Env(t, prefix), "run", "w.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	wf := newCompleted(t, st, map[string]bool{})
	checkLaunchedAs(t, st, wf.WorkflowExecID, "inline:"+strconv.Itoa(pid))
}

// TestRunStartsAWrapperForTheSimpleAPI: under the inline default, an
// activity whose definition asks for WHIMBREL_API=simple still gets a
// whimbrel-run, which reports through events that a whimbrel-poller
// applies, and the workflow completes; its dependent, which does not ask,
// is supervised inline.
func TestRunStartsAWrapperForTheSimpleAPI(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	daemon(t, env, "whimbrel-poller", "--poll-interval", "50ms", "--discovery", "1s", "--order-window", "2s")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(`name: simple-api
activities:
  simple: {env: {WHIMBREL_API: simple}, command: ["true"]}
  full: {depends_on: [simple], command: ["true"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, code, out := runPID(t, dir, env, "run", "w.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	wf := newCompleted(t, st, map[string]bool{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acts, err := st.Activities(ctx, wf.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"simple": "pid:", "full": "inline:" + strconv.Itoa(pid)}
	for _, a := range acts {
		w := want[a.ActivityName]
		if a.State != state.Completed || !strings.HasPrefix(a.LaunchedAs, w) || (w != "pid:" && a.LaunchedAs != w) {
			t.Errorf("%s: %s, launched as %q; want COMPLETED, launched as %s", a.ActivityName, a.State, a.LaunchedAs, w)
		}
		delete(want, a.ActivityName)
	}
	if len(want) > 0 {
		t.Errorf("activities missing: %v", want)
	}
}

// TestUpSupervisesInlineByDefault: whimbrel up with no --supervise runs
// what start --detach starts inline (launched_as inline:PID, up's pid),
// and stops cleanly on Ctrl-C.
func TestUpSupervisesInlineByDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(superviseWorkflow), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startUp(t, dir)
	out, errOut, code := whimbrelHere(t, dir, "start", "--detach", "w.yaml")
	if code != 0 {
		t.Fatalf("start --detach: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	st := openStore(t, dir, nil)
	waitUntil(t, "the execution completed", func() bool {
		wf, err := st.GetWorkflow(context.Background(), id)
		return err == nil && wf.State == state.WorkflowCompleted
	})
	checkLaunchedAs(t, st, id, "inline:"+strconv.Itoa(s.cmd.Process.Pid))
	if code := s.interrupt(t); code != 0 {
		t.Errorf("whimbrel up exited %d\n%s", code, s.err)
	}
}
