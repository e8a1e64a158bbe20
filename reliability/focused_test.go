package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// Focused tests: one behaviour of DynamoDB that DynamoDB Local lacks,
// each behind the fault proxy (RELIABILITY.md lists them).

// TestUpstreamOutputsThroughALaggingIndex: a join with more upstreams
// than the wrapper reads one by one lists the workflow's activities
// through the workflow index. When that index lags, an upstream's retry
// that completed is not listed yet: the join must still get the output of
// the attempt that completed (read from the table), not the {} of the
// failed attempt the index shows.
func TestUpstreamOutputsThroughALaggingIndex(t *testing.T) {
	r := newRigWith(t, "", dynamotest.Faults{IndexLags: map[string]time.Duration{"workflow-index": 10 * time.Second}})
	dir := t.TempDir()
	f := newFleet(t, r.env)
	f.start("launcher", "whimbrel-launcher", "--interval", "200ms", "--log-dir", dir)
	f.start("monitor", "whimbrel-monitor", "--interval", "1s")
	var b strings.Builder
	b.WriteString("name: fanin\ndefaults: {" + calmTimeouts + "}\nactivities:\n")
	var ups []string
	for i := range 6 {
		name := fmt.Sprintf("u%d", i)
		ups = append(ups, name)
		fmt.Fprintf(&b, "  %s: {command: [sh, -c, 'm=%s/$WHIMBREL_ACTIVITY_NAME; test -e $m || { touch $m; exit 1; }; echo \"{\\\"from\\\": \\\"$WHIMBREL_ACTIVITY_NAME\\\"}\" > $WHIMBREL_OUTPUT'], retry: {max_attempts: 2, interval: 100ms}}\n", name, dir)
	}
	fmt.Fprintf(&b, "  join: {command: [sh, -c, 'cp $WHIMBREL_INPUTS %s/join.json'], depends_on: [%s]}\n", dir, strings.Join(ups, ", "))
	d, err := definition.Parse("fanin.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(context.Background(), r.st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wf := settle(t, r.st, []string{id}, 3*time.Minute)[0]
	if wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "join.json"))
	if err != nil {
		t.Fatal(err)
	}
	var in struct{ Outputs map[string]map[string]string }
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("join's inputs %s: %v", raw, err)
	}
	for _, up := range ups {
		if got := in.Outputs[up]["from"]; got != up {
			t.Errorf("join's input from %s is %v; want the output its completed retry recorded", up, in.Outputs[up])
		}
	}
	r.report(t)
}

// TestSettleWaitsForAnInvisibleRetry: a failed attempt's retry is a new
// item, which the workflow index shows only after its lag. A settle that
// lists the workflow's activities in between must not settle the workflow
// FAILED on the failed attempt alone; nor, once the retry completed, on
// the failed attempt while the index still lacks the retry.
func TestSettleWaitsForAnInvisibleRetry(t *testing.T) {
	lag := 6 * time.Second
	r := newRigWith(t, "", dynamotest.Faults{})
	st := dynamodb.New(r.proxy.Client(false), dynamodb.Options{Prefix: r.st.Prefix(), CallTimeout: dynamotest.CallTimeout})
	ctx := context.Background()
	d, err := definition.Parse("r.yaml", []byte("name: r\nactivities:\n  a: {command: [true], retry: {max_attempts: 2, interval: 10ms}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, r.st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Everything visible so far; from now on the workflow index lags.
	r.proxy.SetFaults(dynamotest.Faults{IndexLags: map[string]time.Duration{"workflow-index": lag}})
	first := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	end := func(k state.ActivityKey, to state.ActivityState, code int) *state.ActivityExec {
		t.Helper()
		owner := "test:" + k.ActivityExecID
		if _, err := r.st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
			Claim: &state.Claim{Owner: owner, HeartbeatEnabled: false}}); err != nil {
			t.Fatal(err)
		}
		a, err := r.st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to, Owner: owner,
			Exit: &state.Exit{Code: code}})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	failed := end(first, state.Failed, 1)
	res, err := workflow.Advance(ctx, st, failed, nil)
	if err != nil || res.Retried == "" {
		t.Fatalf("advance after the failed attempt: %+v, %v; want a retry", res, err)
	}
	if got, err := workflow.Settle(ctx, st, id, nil); err != nil || got != "" {
		t.Errorf("settle while the retry is not in the index: %q, %v; want nothing settled", got, err)
	}
	done := end(state.ActivityKey{ActivityExecID: res.Retried, WorkflowExecID: id}, state.Completed, 0)
	if got, err := workflow.Settle(ctx, st, id, nil); err != nil || got == state.WorkflowFailed {
		t.Errorf("settle after the retry completed, before the index shows it: %q, %v; want not FAILED", got, err)
	}
	if s := r.proxy.Stats(); s.StaleReads == 0 {
		t.Errorf("the settles read no stale index: the test proves nothing (%s)", s)
	}
	time.Sleep(lag + time.Second)
	got, err := workflow.Advance(ctx, st, done, nil)
	if err != nil || got.Settled != state.WorkflowCompleted {
		if wf, _ := r.st.GetWorkflow(ctx, id); wf == nil || wf.State != state.WorkflowCompleted {
			t.Errorf("once the index caught up: %+v, %v; want COMPLETED", got, err)
		}
	}
}

// TestClocksBeyondTheTolerance: wrappers whose clocks are behind the
// monitor's. Within the tolerance (half the monitor's --skew) nothing
// live is timed out. Beyond it (the lag of a wrapper's clock past the
// skew and the heartbeat timeout's slack), its heartbeats look stale from
// the moment they are written: the monitor times out live activities, and
// each wrapper, at its next heartbeat, stops its command and records how
// it ended beside TIMED_OUT. Nothing runs twice and no outcome is lost.
func TestClocksBeyondTheTolerance(t *testing.T) {
	// A lease of 5 s, so that a loaded machine does not lose one; the
	// monitor allows 2 s of skew.
	const skew, timeout = 2 * time.Second, 5 * time.Second
	for _, tc := range []struct {
		name     string
		offset   time.Duration
		timedOut bool
	}{
		{"half the tolerance", -skew / 2, false},
		{"beyond the tolerance", -(skew + timeout + 3*time.Second), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRigWith(t, "", dynamotest.Faults{})
			dir := t.TempDir()
			log := filepath.Join(dir, "runs.log")
			f := newFleet(t, r.env)
			f.skewed(tc.offset, "launcher", "whimbrel-launcher", "--interval", "200ms", "--log-dir", dir)
			f.start("monitor", "whimbrel-monitor", "--interval", "300ms", "--skew", skew.String())
			d := fanOut(t, "skew", 4, "heartbeat_interval: 500ms, heartbeat_timeout: "+timeout.String()+", queued_timeout: 2m, kill_grace: 1s",
				`echo $WHIMBREL_ACTIVITY_EXEC_ID >> `+log+`; sleep 4`, "")
			id, _, err := workflow.Start(context.Background(), r.st, d, workflow.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wf := settle(t, r.st, []string{id}, 3*time.Minute)[0]
			seen := runs(t, log)
			var acts []*state.ActivityExec
			for recordBy := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
				if acts, err = r.st.Activities(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				recorded := 0
				for _, a := range acts {
					if a.State != state.TimedOut || a.ExitCode != nil {
						recorded++
					}
				}
				if recorded == len(acts) || time.Now().After(recordBy) {
					break
				}
			}
			timedOut := 0
			for _, a := range acts {
				if !a.State.Terminal() {
					t.Errorf("%s is %s in a settled workflow", a.ActivityName, a.State)
				}
				if n := seen[a.ActivityExecID]; n > 1 {
					t.Errorf("%s ran %d times", a.ActivityName, n)
				}
				if a.State == state.TimedOut {
					timedOut++
					if a.ExitCode == nil {
						t.Errorf("%s TIMED_OUT with no exit recorded: its wrapper's outcome was lost", a.ActivityName)
					}
				}
			}
			switch {
			case !tc.timedOut && (timedOut > 0 || wf.State != state.WorkflowCompleted):
				t.Errorf("clocks within the tolerance: workflow %s, %d timed out (%s)", wf.State, timedOut, describe(acts))
			case tc.timedOut && timedOut == 0:
				t.Errorf("clocks beyond the tolerance timed nothing out: the test proves nothing (%s)", describe(acts))
			}
			t.Logf("wrapper clocks %s off the monitor's (--skew %s): workflow %s; %s", tc.offset, skew, wf.State, describe(acts))
		})
	}
}

// TestAnswersLostAfterWrites: a third of the data calls fail with a 500,
// and every such write was applied first (the request timed out after it
// succeeded): the SDK sends it again and meets its own write. Every
// participant recognises its own move (the launcher's hold token, the
// wrapper's owner token) instead of taking it for another's: every
// command runs exactly once and the workflow completes.
func TestAnswersLostAfterWrites(t *testing.T) {
	r := newRigWith(t, "", dynamotest.Faults{Errors: 0.2, AfterWrite: 1})
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	f := newFleet(t, r.env)
	f.start("launcher", "whimbrel-launcher", "--interval", "200ms", "--log-dir", dir)
	f.start("monitor", "whimbrel-monitor", "--interval", "1s")
	d := fanOut(t, "lost", 8, calmTimeouts, `echo $WHIMBREL_ACTIVITY_EXEC_ID >> `+log, "")
	id, _, err := workflow.Start(context.Background(), r.st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wf := settle(t, r.st, []string{id}, 3*time.Minute)[0]
	acts, err := r.st.Activities(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	seen := runs(t, log)
	for _, a := range acts {
		if n := seen[a.ActivityExecID]; n != 1 || a.State != state.Completed {
			t.Errorf("%s ran %d times and is %s (%s)", a.ActivityName, n, a.State, a.Reason)
		}
	}
	if wf.State != state.WorkflowCompleted {
		t.Errorf("workflow %s: %s", wf.State, wf.Reason)
	}
	if s := r.proxy.Stats(); s.ErrorsAfterWrite < 5 {
		t.Errorf("only %d writes were answered 500 after they were applied: the test proves little (%s)", s.ErrorsAfterWrite, s)
	}
	r.report(t)
}

// TestMonitorJudgesTheItem: the state index, lagging, still lists as
// RUNNING an activity that has completed, with a heartbeat long past its
// timeout. The monitor confirms with a consistent read of the item before
// it judges: nothing is timed out.
func TestMonitorJudgesTheItem(t *testing.T) {
	r := newRigWith(t, "", dynamotest.Faults{})
	st := dynamodb.New(r.proxy.Client(false), dynamodb.Options{Prefix: r.st.Prefix(), CallTimeout: dynamotest.CallTimeout})
	ctx := context.Background()
	d, err := definition.Parse("m.yaml", []byte("name: m\nactivities:\n  a: {command: [true]}\n  b: {command: [true], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, r.st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	owner := "test:a"
	if _, err := r.st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: &state.Claim{Owner: owner, HeartbeatEnabled: true, HeartbeatInterval: time.Second, HeartbeatTimeout: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	// The index shows RUNNING at once; from now on it lags.
	r.proxy.SetFaults(dynamotest.Faults{IndexLag: time.Minute})
	if _, err := r.st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner,
		Exit: &state.Exit{Code: 0}}); err != nil {
		t.Fatal(err)
	}
	refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Running})
	if err != nil || len(refs) != 1 {
		t.Fatalf("the lagging index lists %d RUNNING (%v); want the completed activity still: the test proves nothing", len(refs), err)
	}
	m := monitor.New(st, monitor.Config{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	rep, err := m.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a, err := r.st.GetActivity(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if rep.TimedOut != 0 || a.State != state.Completed {
		t.Errorf("a sweep over the stale listing timed out %d; the activity is %s (%s)", rep.TimedOut, a.State, a.Reason)
	}
}
