package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

var binary string

// TestMain builds whimbrel-run once, with the fault points compiled in.
func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		binary = filepath.Join(dir, "whimbrel-run")
		return m.Run()
	}, []string{"-race", "-tags", "whimbrel_fault"}, map[string]string{"whimbrel-run": "."})
}

// runningWrapper is one running whimbrel-run.
type runningWrapper struct {
	cmd            *exec.Cmd
	stdout, stderr testbin.Buffer
	done           chan struct{}
	code           int
}

// fixture is a store with one running workflow.
type fixture struct {
	st *dynamodb.Store
	w  *state.NewWorkflow
}

func newFixture(t *testing.T, d storetest.DAG) *fixture {
	t.Helper()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "wf", d)
	storetest.Create(t, st, w)
	return &fixture{st: st, w: w}
}

// queue moves an activity to QUEUED, as a launcher does.
func (f *fixture) queue(t *testing.T, name string) {
	t.Helper()
	a, err := f.st.GetActivity(testbin.Context(t), f.key(name))
	if err != nil {
		t.Fatal(err)
	}
	if a.State == state.Requested && len(a.PendingDependencies) > 0 {
		t.Fatalf("%s still waits on %v", name, a.PendingDependencies)
	}
	if _, err := f.st.UpdateActivity(testbin.Context(t), f.key(name), state.ActivityChange{
		From: []state.ActivityState{state.Requested, state.Ready}, To: state.Queued,
	}); err != nil {
		t.Fatalf("queue %s: %v", name, err)
	}
}

func (f *fixture) key(name string) state.ActivityKey { return storetest.Key(f.w, name) }

func (f *fixture) get(t *testing.T, name string) *state.ActivityExec {
	t.Helper()
	a, err := f.st.GetActivity(testbin.Context(t), f.key(name))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (f *fixture) workflow(t *testing.T) *state.WorkflowExec {
	t.Helper()
	w, err := f.st.GetWorkflow(testbin.Context(t), f.w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// env is the wrapper's environment for the named activity.
func (f *fixture) env(t *testing.T, name string, extra ...string) []string {
	k := f.key(name)
	env := append(dynamotest.Env(t, f.st.Prefix()),
		"PATH="+os.Getenv("PATH"),
		"HOME="+t.TempDir(),
		"WHIMBREL_ACTIVITY_EXEC_ID="+k.ActivityExecID,
		"WHIMBREL_ACTIVITY_NAME="+name,
		"WHIMBREL_WORKFLOW_EXEC_ID="+k.WorkflowExecID,
		"WHIMBREL_WORKFLOW_NAME=wf",
	)
	return append(env, extra...)
}

func start(t *testing.T, env []string, args ...string) *runningWrapper {
	t.Helper()
	w := &runningWrapper{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	w.cmd.Env = env
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatalf("start whimbrel-run: %v", err)
	}
	go func() {
		defer close(w.done)
		err := w.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee) && ee.ExitCode() >= 0:
			w.code = ee.ExitCode()
		case errors.As(err, &ee):
			w.code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		case err != nil:
			w.code = -1
		}
	}()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

// wait returns the wrapper's exit status, failing the test after timeout.
func (w *runningWrapper) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-w.done:
		return w.code
	case <-time.After(timeout):
		t.Fatalf("whimbrel-run did not exit within %s\nstderr:\n%s", timeout, w.stderr.String())
	}
	return 0
}

// run runs a wrapper to its end.
func run(t *testing.T, env []string, args ...string) *runningWrapper {
	t.Helper()
	w := start(t, env, args...)
	w.wait(t, time.Minute)
	return w
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

func alive(pid int) bool {
	// A zombie counts as dead: it has exited.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	return !strings.Contains(string(b), ") Z ")
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestCompletedReadiesDependent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil, "b": {"a"}})
	f.queue(t, "a")
	w := run(t, f.env(t, "a"), "--", "sh", "-c", "echo out; echo err >&2")
	if w.code != 0 {
		t.Fatalf("exit %d, want 0\nstderr:\n%s", w.code, w.stderr.String())
	}
	if w.stdout.String() != "out\n" {
		t.Errorf("stdout %q, want the command's own %q and nothing else", w.stdout.String(), "out\n")
	}
	if !strings.Contains(w.stderr.String(), "err\n") {
		t.Errorf("stderr lacks the command's line:\n%s", w.stderr.String())
	}
	a := f.get(t, "a")
	if a.State != state.Completed || a.ExitCode == nil || *a.ExitCode != 0 || a.Error != "err\n" ||
		a.StartTime.IsZero() || a.EndTime.IsZero() || a.Owner == "" || a.Attempt != 1 || a.PID == 0 || a.Host == "" ||
		!a.HeartbeatEnabled || a.HeartbeatInterval != 15*time.Second || a.HeartbeatTimeout != time.Minute {
		t.Errorf("a after the run: %+v", *a)
	}
	if b := f.get(t, "b"); b.State != state.Ready || len(b.PendingDependencies) != 0 {
		t.Errorf("b is %s pending %v, want READY with nothing pending", b.State, b.PendingDependencies)
	}
	if wf := f.workflow(t); wf.State != state.WorkflowRunning {
		t.Errorf("workflow is %s, want RUNNING while b has not run", wf.State)
	}

	// The dependent runs in turn and settles the workflow.
	w = run(t, f.env(t, "b"), "--", "true")
	if w.code != 0 {
		t.Fatalf("b: exit %d\n%s", w.code, w.stderr.String())
	}
	if wf := f.workflow(t); wf.State != state.WorkflowCompleted || wf.EndTime.IsZero() {
		t.Errorf("workflow is %s (%+v), want COMPLETED", wf.State, wf)
	}
}

func TestFailedCancelsDownstream(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil, "b": {"a"}, "c": {"b"}, "side": nil})
	f.queue(t, "side")
	if w := run(t, f.env(t, "side"), "--", "true"); w.code != 0 {
		t.Fatalf("side: exit %d", w.code)
	}
	f.queue(t, "a")
	w := run(t, f.env(t, "a"), "--", "sh", "-c", "echo boom >&2; exit 3")
	if w.code != 3 {
		t.Fatalf("exit %d, want the command's 3\nstderr:\n%s", w.code, w.stderr.String())
	}
	a := f.get(t, "a")
	if a.State != state.Failed || *a.ExitCode != 3 || a.Error != "boom\n" || a.Reason != "exit status 3" {
		t.Errorf("a: %+v", *a)
	}
	for _, n := range []string{"b", "c"} {
		d := f.get(t, n)
		if d.State != state.Cancelled || !strings.Contains(d.Reason, "ended") {
			t.Errorf("%s is %s (%q), want CANCELLED with the reason", n, d.State, d.Reason)
		}
	}
	if wf := f.workflow(t); wf.State != state.WorkflowFailed || !strings.Contains(wf.Reason, "a FAILED") {
		t.Errorf("workflow %s %q, want FAILED naming a", wf.State, wf.Reason)
	}
}

// TestDiamondReadiesOnce: B and C finish at the same moment; D becomes
// READY exactly once. The race is repeated with real wrappers.
func TestDiamondReadiesOnce(t *testing.T) {
	t.Parallel()
	for i := 0; i < 5; i++ {
		f := newFixture(t, storetest.DAG{"a": nil, "b": {"a"}, "c": {"a"}, "d": {"b", "c"}})
		f.queue(t, "a")
		if w := run(t, f.env(t, "a"), "--", "true"); w.code != 0 {
			t.Fatalf("a: exit %d\n%s", w.code, w.stderr.String())
		}
		f.queue(t, "b")
		f.queue(t, "c")
		gate := filepath.Join(t.TempDir(), "go")
		cmd := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done", gate)
		wb := start(t, f.env(t, "b"), "--", "sh", "-c", cmd)
		wc := start(t, f.env(t, "c"), "--", "sh", "-c", cmd)
		time.Sleep(300 * time.Millisecond)
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if wb.wait(t, time.Minute) != 0 || wc.wait(t, time.Minute) != 0 {
			t.Fatalf("b or c failed:\n%s\n%s", wb.stderr.String(), wc.stderr.String())
		}
		dID := f.key("d").ActivityExecID
		readied := countLines(wb.stderr.String()+wc.stderr.String(), "readied a dependent", "dependent="+dID)
		if d := f.get(t, "d"); d.State != state.Ready || readied != 1 {
			t.Fatalf("round %d: d is %s, readied %d times; want READY once\n%s\n%s", i, d.State, readied, wb.stderr.String(), wc.stderr.String())
		}
	}
}

func TestSIGTERMReachesTheGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "grandchild")
	w := start(t, f.env(t, "a"), "--", "sh", "-c", "sleep 300 & echo $! > "+pidfile+"; wait")
	waitFile(t, pidfile)
	time.Sleep(100 * time.Millisecond) // let the file be written in full
	grandchild := readPID(t, pidfile)
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t, 20*time.Second); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, w.stderr.String())
	}
	if alive(grandchild) {
		t.Errorf("grandchild %d survived: SIGTERM did not reach the group", grandchild)
	}
	a := f.get(t, "a")
	if a.State != state.Failed || *a.ExitCode != 143 || a.Signal != "SIGTERM" {
		t.Errorf("a: state %s exit %v signal %q, want FAILED 143 SIGTERM", a.State, a.ExitCode, a.Signal)
	}
}

func TestIgnoredSIGTERMIsKilledAfterGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	ready := filepath.Join(t.TempDir(), "ready")
	w := start(t, f.env(t, "a"), "--kill-grace", "500ms", "--",
		"sh", "-c", "trap '' TERM; touch "+ready+"; sleep 300")
	waitFile(t, ready)
	began := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t, 20*time.Second); code != 137 {
		t.Fatalf("exit %d, want 137 (SIGKILL)\n%s", code, w.stderr.String())
	}
	if d := time.Since(began); d < 500*time.Millisecond {
		t.Errorf("killed after %s, before the grace", d)
	}
	if a := f.get(t, "a"); a.Signal != "SIGKILL" || a.State != state.Failed {
		t.Errorf("a: %s %q, want FAILED by SIGKILL", a.State, a.Signal)
	}
}

func TestCancelStopsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil, "after": {"a"}})
	f.queue(t, "a")
	ready := filepath.Join(t.TempDir(), "ready")
	w := start(t, f.env(t, "a"), "--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--kill-grace", "5s", "--",
		"sh", "-c", "touch "+ready+"; exec sleep 300")
	waitFile(t, ready)
	if _, err := f.st.UpdateActivity(testbin.Context(t), f.key("a"), state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.CancelledRunning, Reason: "cancelled by test",
	}); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	if code := w.wait(t, 20*time.Second); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, w.stderr.String())
	}
	// About one heartbeat interval (200 ms), plus process and store latency
	// on a machine that may be busy.
	if d := time.Since(cancelled); d > 5*time.Second {
		t.Errorf("stopped %s after the cancellation, want about one heartbeat interval", d)
	}
	a := f.get(t, "a")
	if a.State != state.CancelledRunning || a.ExitCode == nil || *a.ExitCode != 143 || a.EndTime.IsZero() {
		t.Errorf("a: %+v; want CANCELLED_RUNNING with the exit recorded", *a)
	}
	if d := f.get(t, "after"); d.State != state.Cancelled {
		t.Errorf("downstream is %s, want CANCELLED", d.State)
	}
}

func TestLeaseLossStopsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	proxy := dynamotest.NewProxy(t)
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	env := f.env(t, "a", "AWS_ENDPOINT_URL_DYNAMODB="+proxy.Endpoint, "AWS_MAX_ATTEMPTS=1")
	w := start(t, env, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "1s", "--kill-grace", "5s",
		"--record-timeout", "1s", "--", "sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	waitFile(t, pidfile)
	// A beat lands (polled: on a loaded machine the first may be late).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a := f.get(t, "a")
		if !a.HeartbeatTime.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat landed before the cut: %+v", *a)
		}
	}
	proxy.Cut()
	cut := time.Now()
	code := w.wait(t, 30*time.Second)
	if code != 123 {
		t.Fatalf("exit %d, want 123 (outcome not recorded: the store is unreachable)\n%s", code, w.stderr.String())
	}
	if d := time.Since(cut); d < time.Second/2 {
		t.Errorf("stopped %s after the cut, sooner than the lease allows", d)
	}
	if alive(readPID(t, pidfile)) {
		t.Error("the command survived the lost lease")
	}
	if !strings.Contains(w.stderr.String(), "lease lost") || !strings.Contains(w.stderr.String(), "OUTCOME NOT RECORDED") {
		t.Errorf("stderr should say the lease was lost and log the unrecorded outcome:\n%s", w.stderr.String())
	}
	// The item still says RUNNING: the monitor will time it out.
	if a := f.get(t, "a"); a.State != state.Running {
		t.Errorf("a is %s, want RUNNING (nothing could be written)", a.State)
	}
}

func TestTimeoutStopsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	w := run(t, f.env(t, "a"), "--timeout", "300ms", "--", "sleep", "300")
	if w.code != 124 {
		t.Fatalf("exit %d, want 124\n%s", w.code, w.stderr.String())
	}
	a := f.get(t, "a")
	if a.State != state.Failed || !strings.Contains(a.Reason, "--timeout 300ms") || *a.ExitCode != 143 {
		t.Errorf("a: %s %q exit %v, want FAILED naming --timeout", a.State, a.Reason, a.ExitCode)
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	w := run(t, f.env(t, "a"), "--", "no-such-command-whimbrel")
	if w.code != 127 {
		t.Fatalf("exit %d, want 127\n%s", w.code, w.stderr.String())
	}
	a := f.get(t, "a")
	if a.State != state.Failed || *a.ExitCode != 127 || !strings.Contains(a.Error, "no-such-command-whimbrel") {
		t.Errorf("a: %+v", *a)
	}
	if wf := f.workflow(t); wf.State != state.WorkflowFailed {
		t.Errorf("workflow %s, want FAILED", wf.State)
	}
}

// TestAsPID1ReapsOrphans runs the wrapper as PID 1 of a new PID namespace.
// The command orphans a grandchild, waits until it has exited, and counts
// the zombies in the namespace: the wrapper must have reaped it.
func TestAsPID1ReapsOrphans(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) is needed for this test")
	}
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	script := `(sleep 0.1 &); sleep 1; n=$(cat /proc/[0-9]*/stat 2>/dev/null | grep -c ') Z '); echo "zombies=$n"; [ "$n" -eq 0 ] && exit 7; exit 8`
	w := &runningWrapper{cmd: exec.Command("unshare", "--pid", "--fork", "--mount-proc", binary, "--", "sh", "-c", script), done: make(chan struct{})}
	w.cmd.Env = f.env(t, "a")
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	err := w.cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("got %v, want exit 7 (no zombies)\nstdout: %s\nstderr:\n%s", err, w.stdout.String(), w.stderr.String())
	}
	if a := f.get(t, "a"); *a.ExitCode != 7 || a.PID != 1 {
		t.Errorf("a: exit %v pid %d, want 7 recorded by PID 1", a.ExitCode, a.PID)
	}
}

func TestRefusedClaimNeverStartsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"waiting": nil, "held": nil, "b": {"waiting"}})
	f.queue(t, "held")
	if _, err := f.st.UpdateActivity(testbin.Context(t), f.key("held"), state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running,
		Claim: &state.Claim{Owner: "someone-else", Host: "elsewhere", PID: 7},
	}); err != nil {
		t.Fatal(err)
	}
	other := newFixture(t, storetest.DAG{"x": nil})
	if _, err := other.st.UpdateWorkflow(testbin.Context(t), other.w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled}); err != nil {
		t.Fatal(err)
	}
	other.queue(t, "x")

	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"not launchable", f.env(t, "b"), "REQUESTED"},
		{"held by another owner", f.env(t, "held"), "owner someone-else"},
		{"workflow not running", other.env(t, "x"), "is CANCELLED, not RUNNING"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			w := run(t, tc.env, "--", "touch", marker)
			if w.code != 122 {
				t.Errorf("exit %d, want 122\n%s", w.code, w.stderr.String())
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran")
			}
			if !strings.Contains(w.stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, w.stderr.String())
			}
		})
	}
	if a := f.get(t, "held"); a.Owner != "someone-else" || a.State != state.Running {
		t.Errorf("the held activity changed: %+v", *a)
	}
}

// TestDeathAfterFinishIsRepairable kills the wrapper between recording
// COMPLETED and readying the dependents; running the advance step again
// finishes the job.
func TestDeathAfterFinishIsRepairable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil, "b": {"a"}, "c": {"a"}})
	f.queue(t, "a")
	w := run(t, f.env(t, "a", fault.Env+"="+fault.AfterFinish), "--", "true")
	if w.code != fault.ExitCode {
		t.Fatalf("exit %d, want the fault's %d\n%s", w.code, fault.ExitCode, w.stderr.String())
	}
	a := f.get(t, "a")
	if a.State != state.Completed {
		t.Fatalf("a is %s, want COMPLETED", a.State)
	}
	for _, n := range []string{"b", "c"} {
		if d := f.get(t, n); d.State != state.Requested || len(d.PendingDependencies) != 1 {
			t.Fatalf("%s is %s pending %v: the fault fired too late", n, d.State, d.PendingDependencies)
		}
	}
	for i := 0; i < 2; i++ { // and once more: repeating is harmless
		if _, err := workflow.Advance(testbin.Context(t), f.st, a, nil); err != nil {
			t.Fatalf("advance again: %v", err)
		}
	}
	for _, n := range []string{"b", "c"} {
		if d := f.get(t, n); d.State != state.Ready {
			t.Errorf("%s is %s after the repair, want READY", n, d.State)
		}
	}
}

// countLines counts the lines of logs that contain every one of parts.
func countLines(logs string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestTimedOutStopsCommandWithoutChangingState: the monitor timed the
// activity out; the wrapper stops CMD and records its exit beside the
// TIMED_OUT state, which it never changes. With --keep-running-on-lease-loss
// CMD runs to its end instead.
func TestTimedOutStopsCommandWithoutChangingState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		flags    []string
		wantCode int
	}{
		{"stopped", nil, 143},
		{"kept running", []string{"--keep-running-on-lease-loss"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, storetest.DAG{"a": nil, "after": {"a"}})
			f.queue(t, "a")
			dir := t.TempDir()
			ready, finish := filepath.Join(dir, "ready"), filepath.Join(dir, "finish")
			args := append([]string{"--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--"},
				"sh", "-c", fmt.Sprintf("touch %s; while [ ! -e %s ]; do sleep 0.05; done", ready, finish))
			w := start(t, f.env(t, "a"), append(tc.flags, args...)...)
			waitFile(t, ready)
			// Time it out on the last beat seen; a beat landing in
			// between refuses the write (as it would the monitor's), so
			// read again and retry, as the monitor's next sweep would.
			for attempt := 1; ; attempt++ {
				seen := f.get(t, "a").HeartbeatTime
				_, err := f.st.UpdateActivity(testbin.Context(t), f.key("a"), state.ActivityChange{
					From: []state.ActivityState{state.Running}, To: state.TimedOut, HeartbeatSeen: &seen,
					Reason: "timed out by test"})
				if err == nil {
					break
				}
				if !errors.Is(err, state.ErrConflict) || attempt == 20 {
					t.Fatal(err)
				}
			}
			if tc.wantCode == 0 {
				time.Sleep(time.Second) // several beats find TIMED_OUT; CMD must keep running
				select {
				case <-w.done:
					t.Fatalf("CMD was stopped despite --keep-running-on-lease-loss\n%s", w.stderr.String())
				default:
				}
				if err := os.WriteFile(finish, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if code := w.wait(t, 20*time.Second); code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s", code, tc.wantCode, w.stderr.String())
			}
			a := f.get(t, "a")
			if a.State != state.TimedOut || a.ExitCode == nil || *a.ExitCode != tc.wantCode || a.EndTime.IsZero() {
				t.Errorf("a: %+v; want TIMED_OUT with the exit %d recorded", *a, tc.wantCode)
			}
			if d := f.get(t, "after"); d.State != state.Cancelled {
				t.Errorf("downstream is %s, want CANCELLED", d.State)
			}
		})
	}
}

// TestLogsStayOffStdout: the wrapper's own lines go to stderr, as JSON when
// asked, and the SDK's transport warnings (which DynamoDB Local's error
// answers provoke) never reach it at the default level.
func TestLogsStayOffStdout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil, "b": {"a"}, "c": {"b"}})
	f.queue(t, "a")
	w := run(t, f.env(t, "a"), "--log-format", "json", "--", "sh", "-c", "echo only-this")
	if w.code != 0 || w.stdout.String() != "only-this\n" {
		t.Fatalf("exit %d stdout %q", w.code, w.stdout.String())
	}
	lines := strings.Split(strings.TrimSpace(w.stderr.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("expected log lines on stderr, got %q", w.stderr.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"@message"`) {
			t.Errorf("not a JSON log line: %s", l)
		}
	}
	// A refused claim provokes an error answer from DynamoDB Local.
	w = run(t, f.env(t, "c"), "--", "true")
	if w.code != 122 || strings.Contains(w.stderr.String(), "failed to close HTTP response body") ||
		strings.Contains(w.stderr.String(), "checksum") {
		t.Errorf("exit %d; stderr must hold no SDK transport warnings:\n%s", w.code, w.stderr.String())
	}
}

// TestMistypedFlag: a mistyped flag before -- is a usage error; it never
// becomes part of the command, and nothing is claimed.
func TestMistypedFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t, storetest.DAG{"a": nil})
	f.queue(t, "a")
	marker := filepath.Join(t.TempDir(), "ran")
	w := run(t, f.env(t, "a"), "--kill-grac", "5s", "--", "touch", marker)
	if w.code != 125 || !strings.Contains(w.stderr.String(), `did you mean "--kill-grace"`) {
		t.Errorf("exit %d, stderr:\n%s", w.code, w.stderr.String())
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
	if a := f.get(t, "a"); a.State != state.Queued {
		t.Errorf("activity %s, want it left QUEUED", a.State)
	}
}
