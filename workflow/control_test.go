package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// ending is how the driver ends an activity it runs.
type ending struct {
	to     state.ActivityState // COMPLETED when empty
	output string
}

// drive plays launcher and wrapper for a workflow: it runs every READY
// activity to the ending given for it, advances past it, and stops once
// the workflow and its activities are all terminal. It records every
// state it saw each activity in, as a client reading the items would.
func drive(t *testing.T, st state.Store, id string, endings map[string]ending) (*state.WorkflowExec, map[string]*state.ActivityExec, map[string][]state.ActivityState) {
	t.Helper()
	return driveWith(t, st, id, endings, false)
}

// driveRetrying is drive on a store that fails now and then: a failed
// call is tried again at the next round, and the monitor finishes what a
// failed advance left.
func driveRetrying(t *testing.T, st state.Store, id string, endings map[string]ending) (*state.WorkflowExec, map[string]*state.ActivityExec, map[string][]state.ActivityState) {
	t.Helper()
	return driveWith(t, st, id, endings, true)
}

func driveWith(t *testing.T, st state.Store, id string, endings map[string]ending, faulty bool) (*state.WorkflowExec, map[string]*state.ActivityExec, map[string][]state.ActivityState) {
	t.Helper()
	mon := monitor.New(st, monitor.Config{Workflow: id})
	fatal := func(err error) bool {
		if err == nil {
			return false
		}
		if !faulty {
			t.Fatal(err)
		}
		return true
	}
	ctx := testbin.Context(t)
	seen := map[string][]state.ActivityState{}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		wf, err := st.GetWorkflow(ctx, id)
		if fatal(err) {
			continue
		}
		acts, err := st.Activities(ctx, id)
		if fatal(err) {
			continue
		}
		done := wf.State.Terminal()
		for _, a := range acts {
			if l := seen[a.ActivityExecID]; len(l) == 0 || l[len(l)-1] != a.State {
				seen[a.ActivityExecID] = append(seen[a.ActivityExecID], a.State)
			}
			done = done && a.State.Terminal()
		}
		if done {
			return wf, workflow.Latest(acts), seen
		}
		moved := false
		for _, a := range acts {
			// RUNNING under the driver's token: its claim applied but the
			// answer was lost, and the driver goes on from there as a
			// wrapper that retries its claim does.
			claimed := a.State == state.Running && a.Owner == "driver"
			if a.State != state.Ready && !claimed {
				continue
			}
			moved = true
			e := endings[a.ActivityName]
			if e.to == "" {
				e.to = state.Completed
			}
			if !claimed {
				if _, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
					Claim: &state.Claim{Owner: "driver"}}); fatal(err) {
					continue
				}
			}
			c := state.ActivityChange{From: []state.ActivityState{state.Running}, To: e.to, Owner: "driver", Output: e.output}
			if e.to == state.TimedOut {
				c.Owner = ""
			}
			got, err := st.UpdateActivity(ctx, a.ActivityKey, c)
			if fatal(err) {
				continue
			}
			_, err = workflow.Advance(ctx, st, got, nil)
			fatal(err)
		}
		if !moved {
			// What no advance finished (a participant died, or a call
			// failed), the monitor does.
			_, err := mon.Sweep(ctx)
			fatal(err)
			time.Sleep(20 * time.Millisecond)
		}
	}
	acts, _ := st.Activities(ctx, id)
	wf, _ := st.GetWorkflow(ctx, id)
	for _, a := range acts {
		t.Logf("%s %s pending %v owner %q skipped %v: %s", a.ActivityExecID, a.State, a.PendingDependencies, a.Owner, a.Skipped, a.Reason)
	}
	t.Fatalf("workflow %s did not end within 60s: %+v", id, wf)
	return nil, nil, nil
}

// legalPath checks that every state seen of every activity leads, by the
// contract's transitions, to the next one seen.
func legalPath(t *testing.T, seen map[string][]state.ActivityState) {
	t.Helper()
	for id, l := range seen {
		for i := 1; i < len(l); i++ {
			if !state.Reachable(l[i-1], l[i]) {
				t.Errorf("%s went %s → %s: no legal transitions lead there", id, l[i-1], l[i])
			}
		}
	}
}

func startYAML(t *testing.T, st state.Store, yaml string, params map[string]string) string {
	t.Helper()
	d, err := definition.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

const branching = `name: branching
params:
  mode: {default: run}
activities:
  check: {command: ["true"]}
  rebuild:
    depends_on: [check]
    when: "outputs.check.changed && params.mode != 'dry-run'"
    command: ["true"]
  publish: {depends_on: [rebuild], command: ["true"]}
  notify:
    depends_on: [check]
    when: "!outputs.check.changed"
    command: ["true"]
`

// TestWhen: a false when skips the activity (COMPLETED with skipped, by
// legal moves) and its dependent runs; a true one runs.
func TestWhen(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		id := startYAML(t, st, branching, nil)
		wf, acts, seen := drive(t, st, id, map[string]ending{"check": {output: `{"changed": false}`}})
		legalPath(t, seen)
		if wf.State != state.WorkflowCompleted {
			t.Errorf("workflow %s (%s); want COMPLETED", wf.State, wf.Reason)
		}
		r := acts["rebuild"]
		if r.State != state.Completed || !r.Skipped || !strings.Contains(r.Reason, "when") || workflow.Shown(r) != "SKIPPED" {
			t.Errorf("rebuild %s skipped=%v %q; want COMPLETED, skipped, a reason naming its when", r.State, r.Skipped, r.Reason)
		}
		if p := acts["publish"]; p.State != state.Completed || p.Skipped || p.Owner != "driver" {
			t.Errorf("publish %s skipped=%v owner %q; want run after its skipped upstream", p.State, p.Skipped, p.Owner)
		}
		if n := acts["notify"]; n.State != state.Completed || n.Skipped || n.Owner != "driver" {
			t.Errorf("notify %s skipped=%v; want run (its when is true)", n.State, n.Skipped)
		}
		// A when that fails at run time (a missing key) fails the
		// activity, with a reason naming the expression.
		id = startYAML(t, st, branching, nil)
		wf, acts, seen = drive(t, st, id, map[string]ending{"check": {output: `{"other": 1}`}})
		legalPath(t, seen)
		if r := acts["rebuild"]; r.State != state.Failed || r.Skipped || !strings.Contains(r.Reason, `when "outputs.check.changed && params.mode != 'dry-run'"`) {
			t.Errorf("rebuild on a missing key: %s %q; want FAILED naming its when", r.State, r.Reason)
		}
		if p := acts["publish"]; p.State != state.Cancelled {
			t.Errorf("publish after a failed when: %s; want CANCELLED", p.State)
		}
		if wf.State != state.WorkflowFailed {
			t.Errorf("workflow %s; want FAILED", wf.State)
		}
	})
}

// TestTriggerRules judges every rule against upstreams that completed,
// failed, timed out, were skipped and were cancelled.
func TestTriggerRules(t *testing.T) {
	const yaml = `name: rules
activities:
  ok: {command: ["true"]}
  fail: {command: ["true"]}
  slow: {command: ["true"]}
  skipme: {command: ["true"], when: "false"}
  root: {command: ["true"]}
  canc: {command: ["true"], depends_on: [root]}
  success_yes: {command: ["true"], depends_on: [ok, skipme]}
  success_no: {command: ["true"], depends_on: [ok, fail]}
  done_yes: {command: ["true"], trigger_rule: all_done, depends_on: [ok, fail, slow, skipme, canc]}
  allfailed_yes: {command: ["true"], trigger_rule: all_failed, depends_on: [fail, slow, canc]}
  allfailed_no: {command: ["true"], trigger_rule: all_failed, depends_on: [fail, ok]}
  onefailed_yes: {command: ["true"], trigger_rule: one_failed, depends_on: [ok, fail]}
  onefailed_no: {command: ["true"], trigger_rule: one_failed, depends_on: [ok, skipme]}
  onesuccess_yes: {command: ["true"], trigger_rule: one_success, depends_on: [fail, ok]}
  onesuccess_no: {command: ["true"], trigger_rule: one_success, depends_on: [fail, skipme]}
  nonefailed_yes: {command: ["true"], trigger_rule: none_failed, depends_on: [ok, skipme]}
  nonefailed_no: {command: ["true"], trigger_rule: none_failed, depends_on: [ok, canc]}
`
	bothStores(t, func(t *testing.T, st state.Store) {
		id := startYAML(t, st, yaml, nil)
		wf, acts, seen := drive(t, st, id, map[string]ending{
			"fail": {to: state.Failed}, "slow": {to: state.TimedOut}, "root": {to: state.Failed},
		})
		legalPath(t, seen)
		for name, a := range acts {
			switch {
			case strings.HasSuffix(name, "_yes"):
				if a.State != state.Completed || a.Owner != "driver" {
					t.Errorf("%s %s (%s); want it run", name, a.State, a.Reason)
				}
			case strings.HasSuffix(name, "_no"):
				if a.State != state.Cancelled {
					t.Errorf("%s %s; want CANCELLED", name, a.State)
				}
				if name != "success_no" && !workflow.RuleCancelled(a) {
					t.Errorf("%s reason %q; want it to say its rule was not met", name, a.Reason)
				}
				if name == "success_no" && (workflow.RuleCancelled(a) || !strings.Contains(a.Reason, "upstream fail ended FAILED")) {
					t.Errorf("success_no reason %q; want the upstream that failed named, as without rules", a.Reason)
				}
			}
		}
		if c := acts["canc"]; c.State != state.Cancelled || workflow.RuleCancelled(c) || c.Skipped {
			t.Errorf("canc %s %q; want CANCELLED because its upstream failed, not by a rule", c.State, c.Reason)
		}
		// fail and slow are handled (all_done, one_failed, all_failed
		// ran); root's failure is handled by nobody.
		if wf.State != state.WorkflowFailed || wf.DecidedBy != "root" {
			t.Errorf("workflow %s decided by %q (%s); want FAILED decided by root", wf.State, wf.DecidedBy, wf.Reason)
		}
	})
}

// TestHandledFailureCompletes: a failure a one_failed dependent handled
// does not fail the workflow; status names who decided it.
func TestHandledFailureCompletes(t *testing.T) {
	const yaml = `name: handled
activities:
  work: {command: ["true"]}
  page: {command: ["true"], depends_on: [work], trigger_rule: one_failed}
`
	bothStores(t, func(t *testing.T, st state.Store) {
		id := startYAML(t, st, yaml, nil)
		wf, _, _ := drive(t, st, id, map[string]ending{"work": {to: state.Failed}})
		if wf.State != state.WorkflowCompleted || wf.DecidedBy != "page" {
			t.Errorf("workflow %s decided by %q (%s); want COMPLETED, decided by page", wf.State, wf.DecidedBy, wf.Reason)
		}
	})
}

// TestJoinOnce races the advances after both sides of a branch (one
// side skipped): the join is readied exactly once, and only once both
// are final.
func TestJoinOnce(t *testing.T) {
	const yaml = `name: join
activities:
  a: {command: ["true"]}
  b: {command: ["true"], depends_on: [a]}
  c: {command: ["true"], depends_on: [a], when: "false"}
  d: {command: ["true"], depends_on: [a]}
  join: {command: ["true"], depends_on: [b, c, d], trigger_rule: none_failed}
`
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx := testbin.Context(t)
	for round := 0; round < 10; round++ {
		id := startYAML(t, st, yaml, nil)
		k := func(n string) state.ActivityKey {
			return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, n), WorkflowExecID: id}
		}
		run := func(n string) *state.ActivityExec {
			if _, err := st.UpdateActivity(ctx, k(n), state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}}); err != nil {
				t.Fatal(err)
			}
			a, err := st.UpdateActivity(ctx, k(n), state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"})
			if err != nil {
				t.Fatal(err)
			}
			return a
		}
		a := run("a")
		if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
			t.Fatal(err)
		}
		b := run("b")
		if res, err := workflow.Advance(ctx, st, b, nil); err != nil || len(res.Readied) != 0 {
			t.Fatalf("advance after b with d running: %+v %v; want the join left waiting", res, err)
		}
		if j, _ := st.GetActivity(ctx, k("join")); j.State != state.Requested {
			t.Fatalf("join %s before d is final; want REQUESTED", j.State)
		}
		d := run("d")
		var wg sync.WaitGroup
		var mu sync.Mutex
		readied := 0
		for _, x := range []*state.ActivityExec{b, d, b, d} {
			wg.Add(1)
			go func(x *state.ActivityExec) {
				defer wg.Done()
				res, err := workflow.Advance(ctx, st, x, nil)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, r := range res.Readied {
					if r == k("join").ActivityExecID {
						readied++
					}
				}
				mu.Unlock()
			}(x)
		}
		wg.Wait()
		if readied != 1 {
			t.Fatalf("round %d: the join was readied %d times; want once", round, readied)
		}
	}
}

const withFinally = `name: fin
activities:
  work: {command: ["true"]}
  after: {command: ["true"], depends_on: [work]}
finally:
  cleanup: {command: ["echo", "{{ workflow.state }}"]}
  report: {command: ["true"], depends_on: [cleanup]}
`

// TestFinally: the finally activities run once the outcome is known,
// after COMPLETED, after FAILED and after a cancel, and the recorded
// outcome stays what the activities decided; a failing one is reported.
func TestFinally(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		for _, tc := range []struct {
			name    string
			endings map[string]ending
			cancel  bool
			want    state.WorkflowState
			failed  string
		}{
			{"completed", nil, false, state.WorkflowCompleted, ""},
			{"failed", map[string]ending{"work": {to: state.Failed}}, false, state.WorkflowFailed, ""},
			{"finally fails", map[string]ending{"cleanup": {to: state.Failed}}, false, state.WorkflowCompleted, "cleanup FAILED, report CANCELLED"},
			{"cancelled", nil, true, state.WorkflowCancelled, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := testbin.Context(t)
				id := startYAML(t, st, withFinally, nil)
				if tc.cancel {
					if _, err := workflow.Cancel(ctx, st, id, "test", nil); err != nil {
						t.Fatal(err)
					}
					wf, _ := st.GetWorkflow(ctx, id)
					if wf.State != state.WorkflowRunning || wf.Outcome != state.WorkflowCancelled {
						t.Fatalf("after cancel: %s outcome %q; want RUNNING with outcome CANCELLED while its finally runs", wf.State, wf.Outcome)
					}
				}
				wf, acts, seen := drive(t, st, id, tc.endings)
				legalPath(t, seen)
				if wf.State != tc.want || wf.FinallyFailed != tc.failed {
					t.Errorf("workflow %s, finally_failed %q (%s); want %s, %q", wf.State, wf.FinallyFailed, wf.Reason, tc.want, tc.failed)
				}
				for _, n := range []string{"cleanup", "report"} {
					a := acts[n]
					if a == nil {
						t.Fatalf("finally activity %s was never created", n)
					}
					if want := state.Completed; tc.failed != "" && n == "report" {
						want = state.Cancelled
						if a.State != want {
							t.Errorf("%s %s; want %s", n, a.State, want)
						}
					} else if tc.failed == "" && (a.State != want || a.Owner != "driver") {
						t.Errorf("%s %s; want it run", n, a.State)
					}
				}
				if tc.cancel {
					if a := acts["work"]; a.State != state.Cancelled {
						t.Errorf("work %s after cancel; want CANCELLED", a.State)
					}
				}
			})
		}
	})
}

// TestFinallyAfterDeadSettler: the participant that would have decided
// the outcome died after the last activity ended; the monitor's settle
// starts the finally activities.
func TestFinallyAfterDeadSettler(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		ctx := testbin.Context(t)
		id := startYAML(t, st, `name: dead
activities:
  only: {command: ["true"]}
finally:
  cleanup: {command: ["true"]}
`, nil)
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "only"), WorkflowExecID: id}
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		// No advance: its wrapper was killed. drive settles as the
		// monitor's repair does.
		wf, acts, _ := drive(t, st, id, nil)
		if wf.State != state.WorkflowCompleted || acts["cleanup"] == nil || acts["cleanup"].State != state.Completed {
			t.Errorf("workflow %s, cleanup %v; want COMPLETED after cleanup ran", wf.State, acts["cleanup"])
		}
	})
}

// TestControlBehindFaults runs the branching workflow and the rules on
// DynamoDB behind a proxy that throttles, answers 500 after applying
// writes, and lags its indexes.
func TestControlBehindFaults(t *testing.T) {
	t.Parallel()
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
	prefix := dynamotest.Prefix(t)
	clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := clean.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	p.SetFaults(dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.5, IndexLag: 300 * time.Millisecond})
	st := dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	var id string
	for try := 0; ; try++ {
		d, _ := definition.Parse("test.yaml", []byte(withFinally+"  \n"))
		var err error
		id, _, err = workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: "fin::fixed-" + prefix})
		if err == nil {
			break
		}
		if try > 20 || !errors.Is(err, state.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	wf, acts, seen := driveRetrying(t, st, id, map[string]ending{"work": {to: state.Failed}})
	legalPath(t, seen)
	if wf.State != state.WorkflowFailed || acts["cleanup"].State != state.Completed {
		t.Errorf("workflow %s, cleanup %s; want FAILED after cleanup ran", wf.State, acts["cleanup"].State)
	}
	if s := p.Stats(); s.Errors == 0 && s.Throttled == 0 {
		t.Errorf("the proxy injected nothing: %+v", s)
	}
}

// TestRedriveControl: a redrive of a run with a skipped branch and a
// failed activity carries the skipped one as skipped, runs only what did
// not complete (deciding whens and rules again), runs finally again; a
// second redrive refuses, naming the first, and --again forces one.
func TestRedriveControl(t *testing.T) {
	const yaml = `name: redrive
activities:
  check: {command: ["true"]}
  skipped: {command: ["true"], depends_on: [check], when: "false"}
  build: {command: ["true"], depends_on: [check]}
  ship: {command: ["true"], depends_on: [build, skipped]}
finally:
  cleanup: {command: ["true"]}
`
	bothStores(t, func(t *testing.T, st state.Store) {
		ctx := testbin.Context(t)
		id := startYAML(t, st, yaml, nil)
		wf, _, _ := drive(t, st, id, map[string]ending{"build": {to: state.Failed}})
		if wf.State != state.WorkflowFailed || wf.DecidedBy != "build" {
			t.Fatalf("first run %s decided by %q; want FAILED by build", wf.State, wf.DecidedBy)
		}
		again, err := workflow.Rerun(ctx, st, id, true, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// While it runs, a second redrive refuses and names it.
		_, err = workflow.Rerun(ctx, st, id, true, workflow.StartOptions{})
		var re *workflow.RedrivenError
		if !errors.As(err, &re) || re.Redrive != again || !strings.Contains(err.Error(), again) {
			t.Fatalf("second redrive while the first runs: %v; want a refusal naming %s", err, again)
		}
		wf, acts, seen := drive(t, st, again, nil)
		legalPath(t, seen)
		if wf.State != state.WorkflowCompleted {
			t.Errorf("redrive %s (%s); want COMPLETED", wf.State, wf.Reason)
		}
		for name, want := range map[string]string{"check": "carried", "skipped": "carried", "build": "driver", "ship": "driver", "cleanup": "driver"} {
			a := acts[name]
			ran := a.Owner == "driver"
			if (want == "driver") != ran || a.State != state.Completed {
				t.Errorf("%s %s owner %q; want %s", name, a.State, a.Owner, want)
			}
		}
		if s := acts["skipped"]; !s.Skipped || workflow.Shown(s) != "SKIPPED" {
			t.Errorf("skipped carried as %s (skipped=%v); want carried as skipped", workflow.Shown(s), s.Skipped)
		}
		_, err = workflow.Rerun(ctx, st, id, true, workflow.StartOptions{})
		if !errors.As(err, &re) || re.State != state.WorkflowCompleted {
			t.Errorf("redrive after the redrive completed: %v; want a refusal naming it", err)
		}
		if forced, err := workflow.Rerun(ctx, st, id, true, workflow.StartOptions{Again: true}); err != nil || forced == again {
			t.Errorf("--again: %s, %v; want a new redrive", forced, err)
		}
	})
}

// TestDeadDeciders: a participant died after the first write of a skip,
// and another before deciding an activity whose edges it had resolved;
// the monitor finishes both, and the dependents run.
func TestDeadDeciders(t *testing.T) {
	const yaml = `name: dead-deciders
activities:
  a: {command: ["true"]}
  half: {command: ["true"], depends_on: [a], when: "false"}
  undecided: {command: ["true"], depends_on: [a], when: "false"}
  after: {command: ["true"], depends_on: [half, undecided]}
`
	bothStores(t, func(t *testing.T, st state.Store) {
		ctx := testbin.Context(t)
		id := startYAML(t, st, yaml, nil)
		k := func(n string) state.ActivityKey {
			return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, n), WorkflowExecID: id}
		}
		if _, err := st.UpdateActivity(ctx, k("a"), state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "o"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateActivity(ctx, k("a"), state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"}); err != nil {
			t.Fatal(err)
		}
		// The advance after a resolved both edges, wrote the first move of
		// half's skip, and died.
		for _, n := range []string{"half", "undecided"} {
			if _, _, err := st.ResolveDependency(ctx, k(n), k("a").ActivityExecID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.UpdateActivity(ctx, k("half"), state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Queued,
			Hold: "whimbrel:skip", Skipped: true, Reason: "skipped: when \"false\" is false"}); err != nil {
			t.Fatal(err)
		}
		wf, acts, seen := drive(t, st, id, nil)
		legalPath(t, seen)
		if wf.State != state.WorkflowCompleted {
			t.Errorf("workflow %s (%s); want COMPLETED", wf.State, wf.Reason)
		}
		for _, n := range []string{"half", "undecided"} {
			if a := acts[n]; a.State != state.Completed || !a.Skipped {
				t.Errorf("%s %s skipped=%v; want finished as skipped", n, a.State, a.Skipped)
			}
		}
		if a := acts["after"]; a.State != state.Completed || a.Owner != "driver" {
			t.Errorf("after %s; want run", a.State)
		}
	})
}
