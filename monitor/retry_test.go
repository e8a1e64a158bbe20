package monitor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

const retriedPair = `name: wf
defaults:
  retry: {max_attempts: 2, interval: 100ms}
activities:
  long: {command: ["true"]}
  after: {command: ["true"], depends_on: [long]}
`

// attemptsOf lists the items of one activity, first attempt first.
func (f *fixture) attemptsOf(t *testing.T, name string) []*state.ActivityExec {
	t.Helper()
	acts, err := f.st.Activities(testbin.Context(t), f.id)
	if err != nil {
		t.Fatal(err)
	}
	var out []*state.ActivityExec
	for _, a := range acts {
		if a.ActivityName == name {
			out = append(out, a)
		}
	}
	if len(out) == 2 && workflow.AttemptOf(out[0]) > workflow.AttemptOf(out[1]) {
		out[0], out[1] = out[1], out[0]
	}
	return out
}

// wrapKey starts a real whimbrel-run for one attempt (already QUEUED).
func (f *fixture) wrapKey(t *testing.T, k state.ActivityKey, extraEnv []string, args ...string) *exec.Cmd {
	t.Helper()
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

// TestTimedOutAttemptIsRetried: kill -9 of a wrapper; the monitor times
// the attempt out and creates the next one, READY after its delay, while
// the dependent waits; the retry, run by a real wrapper, completes, and
// the dependent is readied.
func TestTimedOutAttemptIsRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, retriedPair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	pidfile := filepath.Join(t.TempDir(), "pid")
	w := f.wrap(t, "long", nil, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "1s", "--",
		"sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	cmdPID := readPID(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(cmdPID, syscall.SIGKILL) })
	waitFor(t, "a heartbeat", 10*time.Second, func() bool { return !f.get(t, "long").HeartbeatTime.IsZero() })
	sweeping(t, f.st, monitor.Config{Interval: 200 * time.Millisecond, Skew: 100 * time.Millisecond})
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second attempt", 30*time.Second, func() bool { return len(f.attemptsOf(t, "long")) == 2 })
	as := f.attemptsOf(t, "long")
	first, next := as[0], as[1]
	if first.State != state.TimedOut || first.RetriedBy != next.ActivityExecID {
		t.Errorf("first attempt %s retried_by %q", first.State, first.RetriedBy)
	}
	if next.State != state.Ready || next.Attempt != 2 || next.RetryOf != first.ActivityExecID || next.NotBefore.Before(first.EndTime.Add(100*time.Millisecond)) {
		t.Errorf("next attempt %+v", next)
	}
	if got := f.get(t, "after").State; got != state.Requested {
		t.Errorf("the dependent is %s while a retry is pending, want REQUESTED", got)
	}
	if wf := f.workflow(t); wf.State != state.WorkflowRunning {
		t.Errorf("workflow %s while a retry is pending", wf.State)
	}
	if _, err := f.st.UpdateActivity(testbin.Context(t), next.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued}); err != nil {
		t.Fatal(err)
	}
	if err := f.wrapKey(t, next.ActivityKey, nil, "--", "true").Wait(); err != nil {
		t.Fatalf("the retry's wrapper: %v", err)
	}
	waitFor(t, "the dependent readied", 10*time.Second, func() bool { return f.get(t, "after").State == state.Ready })
}

// TestRetryAfterDeathAfterFailed: the wrapper dies right after it recorded
// FAILED, before deciding the retry; four monitors sweep at once, and one
// next attempt is created.
func TestRetryAfterDeathAfterFailed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, retriedPair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	w := f.wrap(t, "long", []string{fault.Env + "=" + fault.AfterFinish}, "--", "sh", "-c", "exit 3")
	var ee *exec.ExitError
	if err := w.Wait(); !errors.As(err, &ee) || ee.ExitCode() != fault.ExitCode {
		t.Fatalf("wrapper: %v, want the fault's exit", err)
	}
	if as := f.attemptsOf(t, "long"); len(as) != 1 || as[0].State != state.Failed {
		t.Fatalf("before the sweeps: %d attempts; want the FAILED one alone: the fault fired too late", len(as))
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 2; j++ {
				if _, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	as := f.attemptsOf(t, "long")
	if len(as) != 2 || as[1].Attempt != 2 || as[1].State != state.Ready || as[0].RetriedBy != as[1].ActivityExecID {
		t.Fatalf("after 4 monitors: %d attempts; want one READY retry, linked", len(as))
	}
	if got := f.get(t, "after").State; got != state.Requested {
		t.Errorf("the dependent is %s, want REQUESTED", got)
	}
	if wf := f.workflow(t); wf.State != state.WorkflowRunning {
		t.Errorf("workflow %s", wf.State)
	}
}

// TestFourMonitorsOneRetry: four monitors judge the same stale activity at
// once: one TIMED_OUT, one next attempt, nothing cancelled or settled.
func TestFourMonitorsOneRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, retriedPair)
	past := time.Now().Add(-5 * time.Minute)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, At: past})
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, At: past,
		Claim: storetest.Claim("gone")})
	var mu sync.Mutex
	var total monitor.Report
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t))
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total.TimedOut += r.TimedOut
			total.CancelledDown += r.CancelledDown
			total.Settled += r.Settled
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if total.TimedOut != 1 || total.CancelledDown != 0 || total.Settled != 0 {
		t.Errorf("4 monitors did %+v; want one timeout, nothing cancelled or settled", total)
	}
	as := f.attemptsOf(t, "long")
	if len(as) != 2 || as[0].State != state.TimedOut || as[1].State != state.Ready || as[1].Attempt != 2 {
		t.Fatalf("%d attempts; want the TIMED_OUT one and one READY retry", len(as))
	}
}

// TestRetryLinkAfterDeathAfterCreate: the participant that decided a
// retry died after creating the next attempt, before linking the failed
// one to it; the monitor writes the link (retried_by), and nothing else.
func TestRetryLinkAfterDeathAfterCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, retriedPair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}})
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "o", Exit: &state.Exit{Code: 1}})
	first := f.get(t, "long")
	now := state.Truncate(time.Now())
	next := &state.ActivityExec{
		ActivityKey:  state.ActivityKey{ActivityExecID: state.RetryIDFor(first.ActivityExecID), WorkflowExecID: f.id},
		WorkflowName: first.WorkflowName, ActivityName: "long", State: state.Ready, StateTime: now,
		Attempt: 2, RetryOf: first.ActivityExecID, NotBefore: now.Add(time.Hour),
	}
	if err := f.st.CreateActivity(testbin.Context(t), next); err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	as := f.attemptsOf(t, "long")
	if len(as) != 2 || as[0].State != state.Failed || as[0].RetriedBy != next.ActivityExecID || as[1].State != state.Ready {
		t.Fatalf("after the sweep: %d attempts, the first %s retried_by %q; want it FAILED and linked to the READY retry %s",
			len(as), as[0].State, as[0].RetriedBy, next.ActivityExecID)
	}
	if got := f.get(t, "after").State; got != state.Requested {
		t.Errorf("the dependent is %s, want REQUESTED", got)
	}
}

// TestLateRetryInACancelledWorkflowExpires: a retry created while the
// workflow was being cancelled, after its items were marked to expire, is
// cancelled by the monitor and deleted with the others.
func TestLateRetryInACancelledWorkflowExpires(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "retention: 1h\n"+retriedPair)
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}})
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "o", Exit: &state.Exit{Code: 1}})
	first := f.get(t, "long")
	if _, err := workflow.Cancel(testbin.Context(t), f.st, f.id, "test", nil); err != nil {
		t.Fatal(err)
	}
	wf := f.workflow(t)
	if wf.State != state.WorkflowCancelled || wf.Expires.IsZero() {
		t.Fatalf("workflow %s expires %v; want CANCELLED and marked to expire", wf.State, wf.Expires)
	}
	// The retry's creator read the workflow RUNNING before the cancel.
	now := state.Truncate(time.Now())
	next := &state.ActivityExec{
		ActivityKey:  state.ActivityKey{ActivityExecID: state.RetryIDFor(first.ActivityExecID), WorkflowExecID: f.id},
		WorkflowName: first.WorkflowName, ActivityName: "long", State: state.Ready, StateTime: now,
		Attempt: 2, RetryOf: first.ActivityExecID, NotBefore: now,
	}
	if err := f.st.CreateActivity(testbin.Context(t), next); err != nil {
		t.Fatal(err)
	}
	if _, err := monitor.New(f.st, monitor.Config{}).Sweep(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	got, err := f.st.GetActivity(testbin.Context(t), next.ActivityKey)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != state.Cancelled || !got.Expires.Equal(wf.Expires) {
		t.Errorf("the late retry is %s, expires %v; want CANCELLED, expiring with the workflow at %v", got.State, got.Expires, wf.Expires)
	}
}
