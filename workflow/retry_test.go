package workflow_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// bothStores runs fn on DynamoDB Local and on the embedded store.
func bothStores(t *testing.T, fn func(t *testing.T, st state.Store)) {
	t.Helper()
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		fn(t, dynamotest.NewStore(t, dynamodb.Options{}))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		fn(t, st)
	})
}

// retrying is a workflow whose first activity may be retried; after waits
// on it.
const retrying = `name: flaky
defaults:
  retry: {max_attempts: 3, interval: 300ms, backoff_rate: 2, jitter: none}
activities:
  fetch: {command: ["true"]}
  after: {command: ["true"], depends_on: [fetch]}
`

func startDef(t *testing.T, st state.Store, yaml string) (*definition.Workflow, string) {
	t.Helper()
	d, err := definition.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d, id
}

// attempts lists the items of one activity, by attempt.
func attempts(t *testing.T, st state.Store, id, name string) []*state.ActivityExec {
	t.Helper()
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []*state.ActivityExec
	for _, a := range acts {
		if a.ActivityName == name {
			out = append(out, a)
		}
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if workflow.AttemptOf(out[j]) < workflow.AttemptOf(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// runOnce plays a launcher and a wrapper on the latest attempt of name: it
// waits until the attempt may start (as the launcher does), claims it,
// ends it with the exit code, and advances the workflow. It returns the
// attempt as it ended and when it was claimed.
func runOnce(t *testing.T, st state.Store, id, name string, code int) (*state.ActivityExec, workflow.Result, time.Time) {
	t.Helper()
	as := attempts(t, st, id, name)
	a := as[len(as)-1]
	if a.State != state.Ready {
		t.Fatalf("attempt %d of %s is %s, want READY", workflow.AttemptOf(a), name, a.State)
	}
	if wait := time.Until(a.NotBefore); wait > 0 {
		time.Sleep(wait)
	}
	claimedAt := time.Now()
	owner := "owner-" + a.ActivityExecID
	if _, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: storetest.Claim(owner)}); err != nil {
		t.Fatal(err)
	}
	to := state.Completed
	if code != 0 {
		to = state.Failed
	}
	done, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to,
		Owner: owner, Exit: &state.Exit{Code: code}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := workflow.Advance(testbin.Context(t), st, done, nil)
	if err != nil {
		t.Fatal(err)
	}
	return done, res, claimedAt
}

func wfState(t *testing.T, st state.Store, id string) *state.WorkflowExec {
	t.Helper()
	wf, err := st.GetWorkflow(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func latestState(t *testing.T, st state.Store, id, name string) state.ActivityState {
	t.Helper()
	as := attempts(t, st, id, name)
	return as[len(as)-1].State
}

// TestRetryFailsTwiceThenSucceeds: three runs, linked by retry_of and
// retried_by, each later one no sooner than interval × backoff^(n-1)
// after the failure before it; the dependent waits, runs once, and the
// workflow COMPLETES.
func TestRetryFailsTwiceThenSucceeds(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, retrying)
		var ended []*state.ActivityExec
		var claims []time.Time
		for i, code := range []int{1, 1, 0} {
			done, res, at := runOnce(t, st, id, "fetch", code)
			ended, claims = append(ended, done), append(claims, at)
			if got := workflow.AttemptOf(done); got != i+1 {
				t.Errorf("run %d has attempt %d", i+1, got)
			}
			if code != 0 {
				if res.Retried == "" || len(res.Cancelled) > 0 || res.Settled != "" {
					t.Fatalf("after failed attempt %d: %+v; want a retry, nothing cancelled or settled", i+1, res)
				}
				if got := latestState(t, st, id, "after"); got != state.Requested {
					t.Errorf("after attempt %d failed, the dependent is %s, want REQUESTED (waiting)", i+1, got)
				}
				if got := wfState(t, st, id).State; got != state.WorkflowRunning {
					t.Errorf("after attempt %d failed, the workflow is %s", i+1, got)
				}
			} else if len(res.Readied) != 1 {
				t.Errorf("after the success: %+v, want the dependent readied", res)
			}
		}
		as := attempts(t, st, id, "fetch")
		if len(as) != 3 {
			t.Fatalf("%d attempts, want 3", len(as))
		}
		for i, a := range as {
			if i > 0 && (a.RetryOf != as[i-1].ActivityExecID || as[i-1].RetriedBy != a.ActivityExecID) {
				t.Errorf("attempt %d: retry_of %q, previous retried_by %q; want them linked", i+1, a.RetryOf, as[i-1].RetriedBy)
			}
			if i < 2 && a.State != state.Failed {
				t.Errorf("attempt %d is %s: terminal is terminal", i+1, a.State)
			}
		}
		// Delays: 300ms before the 2nd attempt, 600ms before the 3rd.
		for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
			if gap := claims[i+1].Sub(ended[i].EndTime); gap < want-5*time.Millisecond {
				t.Errorf("attempt %d started %s after attempt %d failed, want at least %s", i+2, gap, i+1, want)
			}
			if nb := as[i+1].NotBefore.Sub(ended[i].EndTime); nb < want-5*time.Millisecond || nb > want+2*time.Second {
				t.Errorf("attempt %d: not_before %s after the failure, want about %s", i+2, nb, want)
			}
		}
		after, res, _ := runOnce(t, st, id, "after", 0)
		if res.Settled != state.WorkflowCompleted {
			t.Errorf("after the dependent: %+v, want the workflow COMPLETED", res)
		}
		if n := len(attempts(t, st, id, "after")); n != 1 || after.State != state.Completed {
			t.Errorf("the dependent ran %d times", n)
		}
	})
}

// TestRetryAlwaysFails: exactly max_attempts runs; then the dependent is
// CANCELLED and the workflow FAILED, naming the attempts.
func TestRetryAlwaysFails(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, strings.Replace(retrying, "300ms", "10ms", 1))
		for i := 0; i < 3; i++ {
			_, res, _ := runOnce(t, st, id, "fetch", 1)
			if final := i == 2; final != (res.Retried == "") {
				t.Fatalf("attempt %d: %+v", i+1, res)
			}
		}
		if n := len(attempts(t, st, id, "fetch")); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		if got := latestState(t, st, id, "after"); got != state.Cancelled {
			t.Errorf("dependent %s, want CANCELLED", got)
		}
		wf := wfState(t, st, id)
		if wf.State != state.WorkflowFailed || !strings.Contains(wf.Reason, "fetch FAILED after 3 of 3 attempts") {
			t.Errorf("workflow %s %q", wf.State, wf.Reason)
		}
	})
}

// TestRetryOnlyListedExitCodes: with exit_codes, another exit is final;
// with retry_on [TIMED_OUT], a FAILED is final; an activity without a
// policy is never retried.
func TestRetryOnlyListedExitCodes(t *testing.T) {
	t.Parallel()
	for name, yaml := range map[string]string{
		"exit code not listed": strings.Replace(retrying, "jitter: none", "jitter: none, exit_codes: [75]", 1),
		"failed not retried":   strings.Replace(retrying, "jitter: none", "jitter: none, retry_on: [TIMED_OUT]", 1),
		"no policy":            "name: flaky\nactivities:\n  fetch: {command: [\"true\"]}\n  after: {command: [\"true\"], depends_on: [fetch]}\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bothStores(t, func(t *testing.T, st state.Store) {
				_, id := startDef(t, st, yaml)
				_, res, _ := runOnce(t, st, id, "fetch", 2)
				if res.Retried != "" || res.Settled != state.WorkflowFailed {
					t.Errorf("exit 2: %+v, want no retry and the workflow FAILED", res)
				}
				if n := len(attempts(t, st, id, "fetch")); n != 1 {
					t.Errorf("%d attempts, want 1", n)
				}
			})
		})
	}
	// The listed code is retried.
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, strings.Replace(retrying, "jitter: none", "jitter: none, exit_codes: [75]", 1))
		if _, res, _ := runOnce(t, st, id, "fetch", 75); res.Retried == "" {
			t.Errorf("exit 75 (listed): %+v, want a retry", res)
		}
	})
}

// TestRetryDecidedOnce: eight participants advance the same failed attempt
// at once (a wrapper, monitors, a replay): one next attempt is written, and
// every one of them names it.
func TestRetryDecidedOnce(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, retrying)
		a := attempts(t, st, id, "fetch")[0]
		owner := "o"
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: storetest.Claim(owner)},
			{From: []state.ActivityState{state.Running}, To: state.TimedOut},
		} {
			var err error
			if a, err = st.UpdateActivity(testbin.Context(t), a.ActivityKey, c); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		got := make([]workflow.Result, 8)
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if got[i], err = workflow.Advance(testbin.Context(t), st, a, nil); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		for _, r := range got {
			if r.Retried != state.RetryIDFor(a.ActivityExecID) || len(r.Cancelled) > 0 {
				t.Errorf("an advance did %+v", r)
			}
		}
		as := attempts(t, st, id, "fetch")
		if len(as) != 2 || as[1].Attempt != 2 || as[0].State != state.TimedOut {
			t.Fatalf("attempts %d, want the TIMED_OUT one and one retry", len(as))
		}
	})
}

// TestSettleMakesAMissingRetry: the participant that recorded FAILED died
// before deciding the retry. Settling (what the monitor and every other
// advance do) makes the retry instead of failing the workflow.
func TestSettleMakesAMissingRetry(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, "name: leaf\ndefaults:\n  retry: {max_attempts: 2, interval: 10ms}\nactivities:\n  only: {command: [\"true\"]}\n")
		a := attempts(t, st, id, "only")[0]
		if _, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: storetest.Claim("o")}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "o", Exit: &state.Exit{Code: 1}}); err != nil {
			t.Fatal(err)
		}
		// No advance: the wrapper died here.
		for i := 0; i < 2; i++ {
			settled, err := workflow.Settle(testbin.Context(t), st, id, nil)
			if err != nil || settled != "" {
				t.Fatalf("settle %d: %q %v; want the workflow left running", i+1, settled, err)
			}
		}
		as := attempts(t, st, id, "only")
		if len(as) != 2 || as[1].State != state.Ready || as[0].RetriedBy != as[1].ActivityExecID {
			t.Fatalf("%d attempts; want the retry READY and linked", len(as))
		}
		if _, res, _ := runOnce(t, st, id, "only", 0); res.Settled != state.WorkflowCompleted {
			t.Errorf("the retry completed: %+v, want the workflow COMPLETED", res)
		}
	})
}

// TestCancelDuringBackoff: a workflow cancelled while a retry waits out
// its delay: the retry is CANCELLED, never runs, and nothing retries again.
func TestCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, strings.Replace(retrying, "300ms", "1h", 1))
		failed, res, _ := runOnce(t, st, id, "fetch", 1)
		if res.Retried == "" {
			t.Fatalf("%+v, want a retry", res)
		}
		if _, err := workflow.Cancel(testbin.Context(t), st, id, "operator", nil); err != nil {
			t.Fatal(err)
		}
		as := attempts(t, st, id, "fetch")
		if len(as) != 2 || as[1].State != state.Cancelled {
			t.Fatalf("retry is %s, want CANCELLED", as[len(as)-1].State)
		}
		if got := latestState(t, st, id, "after"); got != state.Cancelled {
			t.Errorf("dependent %s, want CANCELLED", got)
		}
		// A late advance of the failed attempt (a slow monitor) retries
		// nothing in a cancelled workflow.
		res, err := workflow.Advance(testbin.Context(t), st, failed, nil)
		if err != nil || res.Retried != state.RetryIDFor(failed.ActivityExecID) && res.Retried != "" {
			t.Fatalf("late advance: %+v %v", res, err)
		}
		if n := len(attempts(t, st, id, "fetch")); n != 2 {
			t.Errorf("%d attempts after the cancel, want 2", n)
		}
		if wf := wfState(t, st, id); wf.State != state.WorkflowCancelled {
			t.Errorf("workflow %s", wf.State)
		}
	})
}

// TestRerunCountsFromOne: a rerun of a workflow whose activity was retried
// starts again at attempt 1.
func TestRerunCountsFromOne(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, strings.Replace(retrying, "300ms", "10ms", 1))
		for i := 0; i < 3; i++ {
			runOnce(t, st, id, "fetch", 1)
		}
		for _, fromFailure := range []bool{false, true} {
			again, err := workflow.Rerun(testbin.Context(t), st, id, fromFailure, workflow.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			as := attempts(t, st, again, "fetch")
			if len(as) != 1 || workflow.AttemptOf(as[0]) != 1 || as[0].RetryOf != "" {
				t.Errorf("rerun (from failure %v): %d attempts, first attempt %d", fromFailure, len(as), workflow.AttemptOf(as[0]))
			}
			if _, res, _ := runOnce(t, st, again, "fetch", 1); res.Retried == "" {
				t.Errorf("the rerun's first failure is not retried: %+v", res)
			}
			if as := attempts(t, st, again, "fetch"); len(as) != 2 || as[1].Attempt != 2 {
				t.Errorf("the rerun's retry is not attempt 2")
			}
		}
	})
}

// TestNoPolicyNoRetryPending: an activity without a retry policy has no
// retry to come after it failed or timed out, and neither has an
// activity the definition does not hold.
func TestNoPolicyNoRetryPending(t *testing.T) {
	t.Parallel()
	d, err := definition.Parse("once.yaml", []byte("name: once\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []state.ActivityState{state.Failed, state.TimedOut} {
		for _, name := range []string{"a", "absent"} {
			if workflow.RetryPending(d, &state.ActivityExec{ActivityName: name, State: s, Attempt: 1}) {
				t.Errorf("%s %s: a retry pending without a policy", name, s)
			}
		}
	}
	d, err = definition.Parse("twice.yaml", []byte("name: twice\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !workflow.RetryPending(d, &state.ActivityExec{ActivityName: "a", State: state.Failed, Attempt: 1}) {
		t.Error("a first attempt that failed under max_attempts 2: no retry pending")
	}
}

// TestRetryLogNamesTheActivityOnce: the wrapper's logger names its
// activity already; the retry's line does not name it a second time, and
// a logger that does not (the monitor's) gets it named.
func TestRetryLogNamesTheActivityOnce(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(testbin.Context(t), false); err != nil {
		t.Fatal(err)
	}
	for _, named := range []bool{true, false} {
		_, id := startDef(t, st, retrying)
		a := attempts(t, st, id, "fetch")[0]
		owner := "owner"
		if _, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
			Claim: &state.Claim{Owner: owner}}); err != nil {
			t.Fatal(err)
		}
		done, err := st.UpdateActivity(testbin.Context(t), a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed,
			Owner: owner, Exit: &state.Exit{Code: 1}})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
		if named {
			log = log.With("activity_exec_id", a.ActivityExecID)
		}
		if _, err := workflow.Advance(testbin.Context(t), st, done, log); err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "retrying an activity") {
				line = l
			}
		}
		if n := strings.Count(line, "activity_exec_id="+a.ActivityExecID); n != 1 {
			t.Errorf("logger naming the activity: %v; the retry's line names it %d times: %q", named, n, line)
		}
	}
}
