package launcher_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestRetryWaitsForNotBefore: a launch that fails is a FAILED attempt
// like any other, so the policy retries it; the launcher leaves the retry
// alone until its not_before, then launches it once.
func TestRetryWaitsForNotBefore(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2, interval: 2s}}\n")
	failing := &counting{err: errors.New("no such image")}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: failing}})
	if _, err := l.Once(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	first, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
	if err != nil || first.State != state.Failed || first.RetriedBy == "" {
		t.Fatalf("first attempt: %+v %v; want FAILED and retried", first, err)
	}
	retry, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: first.RetriedBy, WorkflowExecID: id})
	if err != nil || retry.State != state.Ready || retry.NotBefore.IsZero() {
		t.Fatalf("retry: %+v %v", retry, err)
	}

	ok := &counting{}
	reads := &countingReads{Store: st, key: retry.ActivityKey}
	l = launcher.New(reads, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: ok}})
	for time.Until(retry.NotBefore) > 300*time.Millisecond {
		if n, err := l.Once(testbin.Context(t)); n != 0 || err != nil {
			t.Fatalf("launched %d (%v) %s before the retry's not_before", n, err, time.Until(retry.NotBefore))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Its not_before never changes: the launcher read it once.
	if n := reads.n.Load(); n != 1 {
		t.Errorf("the waiting retry was read %d times before its not_before, want once", n)
	}
	time.Sleep(time.Until(retry.NotBefore))
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
		t.Fatalf("after not_before: launched %d (%v), want the retry", n, err)
	}
	if len(ok.jobs) != 1 || ok.jobs[0].Key != retry.ActivityKey || !time.Now().After(retry.NotBefore) {
		t.Errorf("launched %+v, want the retry, after its not_before", ok.jobs)
	}
}

// countingReads counts the reads of one activity.
type countingReads struct {
	launcher.Store
	key state.ActivityKey
	n   atomic.Int64
}

func (c *countingReads) GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	if k == c.key {
		c.n.Add(1)
	}
	return c.Store.GetActivity(ctx, k)
}

// claimingThenSilent is a backend whose first call starts the activity (a
// wrapper claims it) but never answers; later calls are counted: each
// would start the activity a second time.
type claimingThenSilent struct {
	st      state.Store
	calls   atomic.Int64
	claimer string
}

func (b *claimingThenSilent) Launch(ctx context.Context, j launcher.Job) (string, error) {
	if b.calls.Add(1) > 1 {
		return "second:" + j.ActivityName, nil
	}
	_, err := b.st.UpdateActivity(ctx, j.Key, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running,
		Claim: &state.Claim{Owner: b.claimer, Host: "c0ffee", PID: 1},
	})
	if err != nil {
		return "", err
	}
	<-ctx.Done() // the answer is lost
	return "", ctx.Err()
}

// TestUnknownLaunchClaimedIsNotRepeated: a launch call cut off before its
// answer is repeated only while nothing has claimed the activity; once a
// wrapper has claimed it, the launch happened, so the launcher records it
// as done (with what it knows) instead of starting it again.
func TestUnknownLaunchClaimedIsNotRepeated(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"]}\n")
	b := &claimingThenSilent{st: st, claimer: "wrapper-token"}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: b},
		CallTimeout: 300 * time.Millisecond, RetryInterval: 10 * time.Millisecond})
	n, err := l.Once(testbin.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := b.calls.Load(); c != 1 {
		t.Errorf("the backend was called %d times, want once: the wrapper had claimed the activity", c)
	}
	a := activity(t, st, id, "a")
	if n != 1 || a.State != state.Running || a.Owner != "wrapper-token" ||
		!strings.Contains(a.LaunchedAs, "cut off") || !strings.Contains(a.LaunchedAs, "c0ffee") {
		t.Errorf("launched %d; a: %s owner %q launched as %q; want 1, RUNNING under the wrapper, the launch recorded with the claim's host",
			n, a.State, a.Owner, a.LaunchedAs)
	}
}
