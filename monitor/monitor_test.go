package monitor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

var wrapper string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		wrapper = filepath.Join(dir, "whimbrel-run")
		return m.Run()
	}, []string{"-tags", "whimbrel_fault"}, map[string]string{"whimbrel-run": "../cmd/whimbrel-run"})
}

// fixture is a store with one workflow started from a definition.
type fixture struct {
	st *dynamodb.Store
	id string
}

func newFixture(t *testing.T, yaml string) *fixture {
	t.Helper()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	d, err := definition.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, id: id}
}

func (f *fixture) key(name string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(f.id, name), WorkflowExecID: f.id}
}

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
	wf, err := f.st.GetWorkflow(testbin.Context(t), f.id)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func (f *fixture) move(t *testing.T, name string, c state.ActivityChange) {
	t.Helper()
	if _, err := f.st.UpdateActivity(testbin.Context(t), f.key(name), c); err != nil {
		t.Fatalf("move %s: %v", name, err)
	}
}

// wrap starts a real whimbrel-run for the named activity (already QUEUED).
func (f *fixture) wrap(t *testing.T, name string, extraEnv []string, args ...string) *exec.Cmd {
	t.Helper()
	k := f.key(name)
	cmd := exec.Command(wrapper, args...)
	cmd.Env = append(append(dynamotest.Env(t, f.st.Prefix()), "PATH="+os.Getenv("PATH"),
		"WHIMBREL_ACTIVITY_EXEC_ID="+k.ActivityExecID, "WHIMBREL_WORKFLOW_EXEC_ID="+k.WorkflowExecID), extraEnv...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("wrapper stderr:\n%s", stderr.String())
		}
	})
	return cmd
}

// sweeping runs a monitor until the test ends.
func sweeping(t *testing.T, st state.Store, cfg monitor.Config) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = monitor.New(st, cfg).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	waitFor(t, "pid file "+path, 20*time.Second, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	b, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

const pair = "name: wf\nactivities:\n  long: {command: [\"true\"]}\n  after: {command: [\"true\"], depends_on: [long]}\n"

// TestKilledWrapperIsTimedOut: kill -9 of a wrapper running a long command;
// the activity is TIMED_OUT within its timeout plus the sweep interval,
// downstream CANCELLED, the workflow FAILED.
func TestKilledWrapperIsTimedOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	pidfile := filepath.Join(t.TempDir(), "pid")
	w := f.wrap(t, "long", nil, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "1s", "--",
		"sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	cmdPID := readPID(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(cmdPID, syscall.SIGKILL) }) // the orphan the wrapper leaves
	waitFor(t, "a heartbeat", 10*time.Second, func() bool { return !f.get(t, "long").HeartbeatTime.IsZero() })

	const interval, skew = 200 * time.Millisecond, 100 * time.Millisecond
	sweeping(t, f.st, monitor.Config{Interval: interval, Skew: skew})
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "TIMED_OUT", 30*time.Second, func() bool { return f.get(t, "long").State == state.TimedOut })
	// Judged on the times the item records, not on how fast this machine
	// is: the monitor decided within timeout + interval (+ skew, + slack
	// for a slow sweep) of the last heartbeat that landed.
	a := f.get(t, "long")
	if gap, limit := a.StateTime.Sub(a.HeartbeatTime), time.Second+interval+skew+2*time.Second; gap > limit || gap < time.Second {
		t.Errorf("timed out %s after the last heartbeat, want between the timeout (1s) and %s", gap, limit)
	}
	waitFor(t, "downstream cancelled and workflow failed", 10*time.Second, func() bool {
		return f.get(t, "after").State == state.Cancelled && f.workflow(t).State == state.WorkflowFailed
	})
}

// TestStoppedWrapperFindsTimedOut: a wrapper paused with SIGSTOP past its
// timeout is timed out; resumed, it finds TIMED_OUT on its next heartbeat
// and stops its command without changing the state.
func TestStoppedWrapperFindsTimedOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	pidfile := filepath.Join(t.TempDir(), "pid")
	w := f.wrap(t, "long", nil, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "1s", "--kill-grace", "5s", "--",
		"sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	cmdPID := readPID(t, pidfile)
	waitFor(t, "a heartbeat", 10*time.Second, func() bool { return !f.get(t, "long").HeartbeatTime.IsZero() })

	sweeping(t, f.st, monitor.Config{Interval: 100 * time.Millisecond, Skew: 100 * time.Millisecond})
	if err := w.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "TIMED_OUT", 20*time.Second, func() bool { return f.get(t, "long").State == state.TimedOut })
	if err := w.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Errorf("wrapper ended with %v, want exit 143", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the resumed wrapper did not stop its command")
	}
	if err := syscall.Kill(cmdPID, 0); err == nil {
		t.Error("the command is still running")
		_ = syscall.Kill(cmdPID, syscall.SIGKILL)
	}
	a := f.get(t, "long")
	if a.State != state.TimedOut || a.ExitCode == nil || *a.ExitCode != 143 {
		t.Errorf("after resuming: %s exit %v, want TIMED_OUT with 143 recorded", a.State, a.ExitCode)
	}
}

// TestSlowHeartbeatsAreNotTimedOut: every heartbeat takes half a second to
// reach the store, but each lands within the timeout: over more than two
// timeouts of sweeping, the activity is never timed out (a monitor that
// judged it from its start would).
func TestSlowHeartbeatsAreNotTimedOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t, pair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	proxy := dynamotest.NewProxy(t)
	proxy.SetDelay(500 * time.Millisecond)
	const timeout = 5 * time.Second
	w := f.wrap(t, "long", []string{"AWS_ENDPOINT_URL_DYNAMODB=" + proxy.Endpoint},
		"--heartbeat-interval", "1s", "--heartbeat-timeout", timeout.String(), "--", "sleep", "13")
	waitFor(t, "RUNNING", 30*time.Second, func() bool { return f.get(t, "long").State == state.Running })
	mon := monitor.New(f.st, monitor.Config{}) // no skew allowance at all
	for end := time.Now().Add(2*timeout + time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		r, err := mon.Sweep(testbin.Context(t))
		if err != nil {
			t.Fatal(err)
		}
		if r.TimedOut != 0 {
			t.Fatalf("timed out an activity whose heartbeats were slow but in time: %+v", f.get(t, "long"))
		}
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("wrapper: %v", err)
	}
	if a := f.get(t, "long"); a.State != state.Completed {
		t.Errorf("activity %s, want COMPLETED", a.State)
	}
}

// TestRepairAfterDeathAfterFinish: a wrapper dies between COMPLETED and
// readying its dependents; one sweep finishes the job.
func TestRepairAfterDeathAfterFinish(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "name: wf\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n  c: {command: [\"true\"], depends_on: [a]}\n")
	f.move(t, "a", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	w := f.wrap(t, "a", []string{fault.Env + "=" + fault.AfterFinish}, "--", "true")
	var ee *exec.ExitError
	if err := w.Wait(); !errors.As(err, &ee) || ee.ExitCode() != fault.ExitCode {
		t.Fatalf("wrapper: %v, want the fault's exit", err)
	}
	if b := f.get(t, "b"); b.State != state.Requested {
		t.Fatalf("b is %s before the sweep: the fault fired too late", b.State)
	}
	r, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.Repaired != 1 || r.Readied != 2 {
		t.Errorf("sweep: %+v, want one repair readying two", r)
	}
	for _, n := range []string{"b", "c"} {
		if got := f.get(t, n).State; got != state.Ready {
			t.Errorf("%s is %s after one sweep, want READY", n, got)
		}
	}
	// Nothing is left to repair.
	if r, _ := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t)); r != (monitor.Report{}) {
		t.Errorf("second sweep did %+v, want nothing", r)
	}
}

// TestQueuedNeverStarted: an activity launched but never started fails after
// its queued timeout, with the reason; downstream is cancelled.
func TestQueuedNeverStarted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "name: wf\nactivities:\n  a: {command: [\"true\"], queued_timeout: 2m}\n  b: {command: [\"true\"], depends_on: [a]}\n")
	f.move(t, "a", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, LaunchedAs: "container:4f2c"})
	now := time.Now()
	at := func(d time.Duration) monitor.Config {
		return monitor.Config{Now: func() time.Time { return now.Add(d) }}
	}
	if r, err := monitor.New(f.st, at(time.Minute)).Sweep(testbin.Context(t)); err != nil || r.FailedLaunches != 0 {
		t.Fatalf("before the timeout: %+v %v", r, err)
	}
	r, err := monitor.New(f.st, at(3*time.Minute)).Sweep(testbin.Context(t))
	if err != nil || r.FailedLaunches != 1 || r.CancelledDown != 1 {
		t.Fatalf("after the timeout: %+v %v", r, err)
	}
	a := f.get(t, "a")
	if a.State != state.Failed || !strings.Contains(a.Reason, "queued timeout 2m0s") || !strings.Contains(a.Reason, "container:4f2c") {
		t.Errorf("a: %s %q", a.State, a.Reason)
	}
	if b := f.get(t, "b"); b.State != state.Cancelled {
		t.Errorf("b is %s, want CANCELLED", b.State)
	}
	if wf := f.workflow(t); wf.State != state.WorkflowFailed {
		t.Errorf("workflow %s, want FAILED", wf.State)
	}

	// A definition that sets none leaves it to the monitor's setting.
	g := newFixture(t, "name: wf\nactivities:\n  a: {command: [\"true\"]}\n")
	g.move(t, "a", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	cfg := at(3 * time.Minute)
	cfg.QueuedTimeout = time.Minute
	if r, err := monitor.New(g.st, cfg).Sweep(testbin.Context(t)); err != nil || r.FailedLaunches != 1 {
		t.Errorf("with --queued-timeout 1m, 3 minutes QUEUED: %+v %v; want it failed", r, err)
	}
}

// TestFourMonitorsActOnce: 20 stale activities, each with a dependent, and
// 4 monitors sweeping at once: each timeout is recorded once, each
// dependent cancelled once, the workflow settled once.
func TestFourMonitorsActOnce(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: many\nactivities:\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "  a%02d: {command: [\"true\"]}\n  d%02d: {command: [\"true\"], depends_on: [a%02d]}\n", i, i, i)
	}
	f := newFixture(t, b.String())
	past := time.Now().Add(-5 * time.Minute)
	for i := 0; i < 20; i++ {
		n := fmt.Sprintf("a%02d", i)
		f.move(t, n, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, At: past})
		f.move(t, n, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, At: past,
			Claim: storetest.Claim("gone-" + n)})
	}
	var mu sync.Mutex
	var total monitor.Report
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := monitor.New(f.st, monitor.Config{})
			for j := 0; j < 2; j++ {
				r, err := m.Sweep(testbin.Context(t))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				total.TimedOut += r.TimedOut
				total.CancelledDown += r.CancelledDown
				total.Settled += r.Settled
				total.Cancelled += r.Cancelled
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if total.TimedOut != 20 || total.CancelledDown+total.Cancelled != 20 || total.Settled != 1 {
		t.Errorf("4 monitors did %+v; want 20 timeouts, 20 cancellations, 1 settle", total)
	}
	for i := 0; i < 20; i++ {
		if a := f.get(t, fmt.Sprintf("a%02d", i)); a.State != state.TimedOut {
			t.Errorf("a%02d is %s", i, a.State)
		}
		if d := f.get(t, fmt.Sprintf("d%02d", i)); d.State != state.Cancelled {
			t.Errorf("d%02d is %s", i, d.State)
		}
	}
	if wf := f.workflow(t); wf.State != state.WorkflowFailed {
		t.Errorf("workflow %s", wf.State)
	}
}

// TestCleanup: a settled workflow's pending activities are cancelled; a
// cancelled workflow's running ones become CANCELLED_RUNNING.
func TestCleanup(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "name: wf\nactivities:\n  run: {command: [\"true\"]}\n  wait: {command: [\"true\"], depends_on: [run]}\n  ready: {command: [\"true\"]}\n")
	f.move(t, "run", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	f.move(t, "run", state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running,
		Claim: &state.Claim{Owner: "o", HeartbeatEnabled: true, HeartbeatTimeout: time.Hour}})
	if _, err := f.st.UpdateWorkflow(testbin.Context(t), f.id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: "operator"}); err != nil {
		t.Fatal(err)
	}
	r, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t))
	if err != nil || r.Cancelled != 2 || r.CancelledRunning != 1 {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	for n, want := range map[string]state.ActivityState{"run": state.CancelledRunning, "wait": state.Cancelled, "ready": state.Cancelled} {
		if a := f.get(t, n); a.State != want || !strings.Contains(a.Reason, "cancelled") && !strings.Contains(a.Reason, "CANCELLED") {
			t.Errorf("%s: %s %q, want %s with the reason", n, a.State, a.Reason, want)
		}
	}
}

// TestStaleStart: a workflow whose creator died before moving it to RUNNING
// is failed after the queued timeout.
func TestStaleStart(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := withDefinition(t, storetest.NewWorkflow(t, "half", storetest.DAG{"a": nil}), "name: half\nactivities:\n  a: {command: [\"true\"]}\n")
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatal(err)
	}
	// Another client's workflow, without a definition, stays as it is.
	foreign := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil})
	foreign.Exec.Definition = ""
	if err := st.CreateWorkflow(testbin.Context(t), foreign); err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(time.Hour) }
	r, err := monitor.New(st, monitor.Config{Now: later}).Sweep(testbin.Context(t))
	if err != nil || r.FailedStarts != 1 {
		t.Fatalf("sweep: %+v %v", r, err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || wf.State != state.WorkflowFailed || !strings.Contains(wf.Reason, "start did not finish") {
		t.Errorf("workflow %+v %v", wf, err)
	}
	// Its activities are then cancelled by the next sweep.
	if r, _ := monitor.New(st, monitor.Config{Now: later}).Sweep(testbin.Context(t)); r.Cancelled != 1 {
		t.Errorf("next sweep: %+v, want the activity cancelled", r)
	}
}

// TestSweepCostIgnoresHistory: the read units of a sweep's judging do not
// grow with finished workflows; its adoption scan reads a bounded page.
func TestSweepCostIgnoresHistory(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var units float64
	var adoptUnits float64
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: func(c dynamodb.Capacity) {
		mu.Lock()
		if c.Op == "Adopt" { // the adoption scan: bounded, checked below
			adoptUnits = max(adoptUnits, c.Total)
		} else {
			units += c.Total
		}
		mu.Unlock()
	}})
	cost := func() float64 {
		mu.Lock()
		units = 0
		mu.Unlock()
		if _, err := monitor.New(st, monitor.Config{}).Sweep(testbin.Context(t)); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return units
	}
	empty := cost()
	d, err := definition.Parse("w.yaml", []byte("name: done\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 30; i++ {
		id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"a", "b"} {
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, n), WorkflowExecID: id}
			for _, c := range []state.ActivityChange{
				{From: []state.ActivityState{state.Ready}, To: state.Queued},
				{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o"}},
				{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"},
			} {
				if _, err := st.UpdateActivity(testbin.Context(t), k, c); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := workflow.Settle(testbin.Context(t), st, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if after := cost(); after != empty {
		t.Errorf("a sweep read %.1f units over 30 finished workflows, %.1f over none: it must not grow with history", after, empty)
	}
	// The adoption scan reads history, a page of at most AdoptPageItems
	// items at a time (an item of this test is well under 1 KiB: half a
	// read unit for each 4 KiB).
	if bound := float64(dynamodb.AdoptPageItems) / 8; adoptUnits <= 0 || adoptUnits > bound {
		t.Errorf("an adoption page read %.1f units; want some, and at most %.0f", adoptUnits, bound)
	}
}

// TestReadiesWhatAStartLeft: a workflow whose start died after moving it to
// RUNNING but before readying its first activities; one sweep readies them.
func TestReadiesWhatAStartLeft(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := withDefinition(t, storetest.NewWorkflow(t, "half", storetest.DAG{"a": nil, "b": nil, "c": {"a"}}),
		"name: half\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"]}\n  c: {command: [\"true\"], depends_on: [a]}\n")
	storetest.Create(t, st, w) // RUNNING, every activity REQUESTED
	r, err := monitor.New(st, monitor.Config{}).Sweep(testbin.Context(t))
	if err != nil || r.Readied != 2 {
		t.Fatalf("sweep: %+v %v; want a and b readied", r, err)
	}
	for n, want := range map[string]state.ActivityState{"a": state.Ready, "b": state.Ready, "c": state.Requested} {
		if a, _ := st.GetActivity(testbin.Context(t), storetest.Key(w, n)); a.State != want {
			t.Errorf("%s is %s, want %s", n, a.State, want)
		}
	}
}

// withDefinition stores a definition with a test workflow, as whimbrel
// start would.
func withDefinition(t *testing.T, w *state.NewWorkflow, yaml string) *state.NewWorkflow {
	t.Helper()
	d, err := definition.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	w.Exec.Definition = d.JSON()
	return w
}

// TestForeignWorkflowIsNotReadiedEarly: another client's workflow keeps no
// pending sets; a dependent whose upstream still runs is not readied.
func TestForeignWorkflowIsNotReadiedEarly(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": {"a"}})
	w.Exec.Definition = ""
	for i := range w.Activities {
		w.Activities[i].PendingDependencies = nil
	}
	w.Dependencies[0].ActivityExecID = storetest.Key(w, "b").ActivityExecID
	// CreateWorkflow insists on pending sets that match the dependency
	// items; resolving the edge at once leaves b as a seed client writes
	// it: dependency items, and no pending set.
	if err := st.CreateWorkflow(testbin.Context(t), withPending(w)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ResolveDependency(testbin.Context(t), storetest.Key(w, "b"), storetest.Key(w, "a").ActivityExecID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o", HeartbeatEnabled: true, HeartbeatTimeout: time.Hour}},
	} {
		if _, err := st.UpdateActivity(testbin.Context(t), storetest.Key(w, "a"), c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := monitor.New(st, monitor.Config{}).Sweep(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	if b, _ := st.GetActivity(testbin.Context(t), storetest.Key(w, "b")); b.State != state.Requested {
		t.Errorf("b is %s while a runs, want REQUESTED", b.State)
	}
}

func withPending(w *state.NewWorkflow) *state.NewWorkflow {
	for i := range w.Activities {
		if w.Activities[i].ActivityName == "b" {
			w.Activities[i].PendingDependencies = []string{w.Dependencies[0].DependentActivityExecID}
		}
	}
	return w
}

// TestFineHeartbeatEpochs: a foreign client's heartbeat epoch with
// microseconds is judged like any other: timed out when stale, kept when a
// newer one landed.
func TestFineHeartbeatEpochs(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "fine", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o", HeartbeatEnabled: true, HeartbeatTimeout: time.Minute}},
	} {
		if _, err := st.UpdateActivity(testbin.Context(t), k, c); err != nil {
			t.Fatal(err)
		}
	}
	stale := float64(time.Now().Add(-10*time.Minute).UnixMicro()) / 1e6
	_, err := dynamotest.Client(t).UpdateItem(testbin.Context(t), &awsdynamodb.UpdateItemInput{
		TableName:                 aws.String(st.Prefix() + "activity_exec"),
		Key:                       map[string]types.AttributeValue{"activity_exec_id": &types.AttributeValueMemberS{Value: k.ActivityExecID}, "workflow_exec_id": &types.AttributeValueMemberS{Value: k.WorkflowExecID}},
		UpdateExpression:          aws.String("SET heartbeat_time_epoch = :e"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberN{Value: strconv.FormatFloat(stale, 'f', 6, 64)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := monitor.New(st, monitor.Config{}).Sweep(testbin.Context(t))
	if err != nil || r.TimedOut != 1 {
		t.Fatalf("sweep: %+v %v; want the stale activity timed out", r, err)
	}
}

// TestJudgesFromTheClaimsHeartbeat: Whimbrel's claim writes the first
// heartbeat, and an activity claimed by another client that writes none
// (heartbeat_time_epoch -1, no heartbeat_time) is judged from its start.
// Neither is timed out before its timeout; both are after it.
func TestJudgesFromTheClaimsHeartbeat(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "first", storetest.DAG{"ours": nil, "theirs": nil})
	storetest.Create(t, st, w)
	claimed := time.Now()
	for _, n := range []string{"ours", "theirs"} {
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Requested}, To: state.Queued},
			{From: []state.ActivityState{state.Queued}, To: state.Running, At: claimed,
				Claim: &state.Claim{Owner: "o-" + n, HeartbeatEnabled: true, HeartbeatTimeout: time.Minute}},
		} {
			if _, err := st.UpdateActivity(testbin.Context(t), storetest.Key(w, n), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	k := storetest.Key(w, "theirs")
	if _, err := dynamotest.Client(t).UpdateItem(testbin.Context(t), &awsdynamodb.UpdateItemInput{
		TableName:                 aws.String(st.Prefix() + "activity_exec"),
		Key:                       map[string]types.AttributeValue{"activity_exec_id": &types.AttributeValueMemberS{Value: k.ActivityExecID}, "workflow_exec_id": &types.AttributeValueMemberS{Value: k.WorkflowExecID}},
		UpdateExpression:          aws.String("SET heartbeat_time_epoch = :e REMOVE heartbeat_time"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": &types.AttributeValueMemberN{Value: "-1"}},
	}); err != nil {
		t.Fatal(err)
	}
	if a, err := st.GetActivity(testbin.Context(t), k); err != nil || !a.HeartbeatTime.IsZero() {
		t.Fatalf("the foreign claim still has a heartbeat: %+v, %v", a, err)
	}
	at := func(d time.Duration) monitor.Config {
		return monitor.Config{Now: func() time.Time { return claimed.Add(d) }}
	}
	if r, err := monitor.New(st, at(30*time.Second)).Sweep(testbin.Context(t)); err != nil || r.TimedOut != 0 {
		t.Fatalf("half a timeout after the claim: %+v, %v; want nothing timed out", r, err)
	}
	if r, err := monitor.New(st, at(2*time.Minute)).Sweep(testbin.Context(t)); err != nil || r.TimedOut != 2 {
		t.Fatalf("two minutes after the claim: %+v, %v; want both timed out", r, err)
	}
	for _, n := range []string{"ours", "theirs"} {
		a, err := st.GetActivity(testbin.Context(t), storetest.Key(w, n))
		if err != nil || a.State != state.TimedOut {
			t.Errorf("%s: %+v, %v; want TIMED_OUT", n, a, err)
		}
	}
}

// TestForeignSameNamesAreEachRepaired: another client's workflow may give
// several activities one activity_name. The repair judges each on its
// own: a completed one whose advance died readies its dependent, though
// an item of the same name still runs.
func TestForeignSameNamesAreEachRepaired(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": nil, "c": {"b"}})
	w.Exec.Definition = ""
	for i := range w.Activities {
		w.Activities[i].ActivityName = "task"
	}
	storetest.Create(t, st, w)
	run := func(k state.ActivityKey, owner string) {
		t.Helper()
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Requested}, To: state.Ready},
			{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: owner, HeartbeatEnabled: true, HeartbeatTimeout: time.Hour}},
		} {
			if _, err := st.UpdateActivity(testbin.Context(t), k, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(storetest.Key(w, "a"), "oa") // still running
	run(storetest.Key(w, "b"), "ob")
	// b completes; its wrapper dies before advancing.
	if _, err := st.UpdateActivity(testbin.Context(t), storetest.Key(w, "b"), state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "ob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.New(st, monitor.Config{Workflow: w.Exec.WorkflowExecID}).Sweep(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	if c, err := st.GetActivity(testbin.Context(t), storetest.Key(w, "c")); err != nil || c.State != state.Ready {
		t.Errorf("c is %v (%v) after the repair, want READY: b completed", c.State, err)
	}
}

// putSeedItem writes an item as a Full Logic API client does: raw, the
// base contract's attributes only, whole-second times, no shard attributes.
func putSeedItem(t *testing.T, st *dynamodb.Store, base string, attrs map[string]any) {
	t.Helper()
	it := map[string]types.AttributeValue{}
	for k, v := range attrs {
		switch v := v.(type) {
		case string:
			it[k] = &types.AttributeValueMemberS{Value: v}
		case int64:
			it[k] = &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
		default:
			t.Fatalf("putSeedItem: %T", v)
		}
	}
	if _, err := dynamotest.Client(t).PutItem(testbin.Context(t), &awsdynamodb.PutItemInput{TableName: aws.String(st.Prefix() + base), Item: it}); err != nil {
		t.Fatalf("raw PutItem: %v", err)
	}
}

// TestAdoptsForeignWorkflow: a RUNNING workflow a Full Logic API client
// wrote raw, whose only activity completed, is found by no listing until
// a sweep adopts it; that sweep settles it.
func TestAdoptsForeignWorkflow(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id := "seeded::" + uuid.NewString()
	now := time.Now().Add(-time.Minute).Unix()
	putSeedItem(t, st, "workflow_exec", map[string]any{"workflow_exec_id": id, "workflow_name": "seeded",
		"state": "RUNNING", "start_time_epoch": now})
	putSeedItem(t, st, "activity_exec", map[string]any{"activity_exec_id": "a::" + uuid.NewString(), "workflow_exec_id": id,
		"workflow_name": "seeded", "activity_name": "a", "state": "COMPLETED", "state_time_epoch": now})
	if r, err := monitor.New(st, monitor.Config{AdoptPages: -1}).Sweep(testbin.Context(t)); err != nil || r.Settled != 0 {
		t.Fatalf("sweep without adoption: %+v %v; want nothing settled: nothing lists the raw workflow", r, err)
	}
	r, err := monitor.New(st, monitor.Config{}).Sweep(testbin.Context(t))
	if err != nil || r.Adopted != 1 || r.Settled != 1 {
		t.Fatalf("sweep: %+v %v; want the raw workflow adopted and settled", r, err)
	}
	if wf, err := st.GetWorkflow(testbin.Context(t), id); err != nil || wf.State != state.WorkflowCompleted {
		t.Errorf("the raw workflow: %+v %v; want COMPLETED", wf, err)
	}
}

// silentAdopter is a store whose adoption scan times out.
type silentAdopter struct{ monitor.Store }

func (silentAdopter) Adopt(context.Context, int) (int, error) {
	return 0, &state.UnavailableError{Store: "DynamoDB", Op: "Scan", Timeout: time.Second, Err: context.DeadlineExceeded}
}

// TestAdoptionTimeoutDoesNotStopTheSweep: a scan page that timed out is
// reported, and the sweep still judges what runs (here: settles a
// workflow whose only activity completed).
func TestAdoptionTimeoutDoesNotStopTheSweep(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id := "seeded::" + uuid.NewString()
	now := time.Now().Add(-time.Minute).Unix()
	sh, nsh := dynamodb.WorkflowShards(id, "seeded", state.WorkflowRunning)
	putSeedItem(t, st, "workflow_exec", map[string]any{"workflow_exec_id": id, "workflow_name": "seeded",
		"state": "RUNNING", "start_time_epoch": now, dynamodb.AttrStateShard: sh, dynamodb.AttrNameShard: nsh})
	putSeedItem(t, st, "activity_exec", map[string]any{"activity_exec_id": "a::" + uuid.NewString(), "workflow_exec_id": id,
		"workflow_name": "seeded", "activity_name": "a", "state": "COMPLETED", "state_time_epoch": now})
	r, err := monitor.New(silentAdopter{st}, monitor.Config{}).Sweep(testbin.Context(t))
	if !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("sweep error %v, want the adoption's timeout reported", err)
	}
	if r.Settled != 1 {
		t.Fatalf("sweep: %+v %v; want the workflow settled despite the adoption's timeout", r, err)
	}
}
