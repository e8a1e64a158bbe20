package heartbeat_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func TestNewRefusesUnsafeSettings(t *testing.T) {
	tests := []struct {
		interval, timeout time.Duration
		ok                bool
	}{
		{15 * time.Second, time.Minute, true},
		{time.Second, 2 * time.Second, true},
		{time.Second, 1999 * time.Millisecond, false},
		{-time.Second, time.Minute, false},
	}
	for _, tc := range tests {
		_, err := heartbeat.New(nil, heartbeat.Config{Owner: "o", Interval: tc.interval, Timeout: tc.timeout})
		if (err == nil) != tc.ok {
			t.Errorf("interval %s timeout %s: err %v, want ok=%v", tc.interval, tc.timeout, err, tc.ok)
		}
	}
}

// claimed returns a store with one RUNNING activity held by "me".
func claimed(t *testing.T, st state.Store) state.ActivityKey {
	t.Helper()
	w := storetest.NewWorkflow(t, "beat", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	ctx := context.Background()
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Ready}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: storetest.Claim("me")}); err != nil {
		t.Fatal(err)
	}
	return k
}

func runPump(t *testing.T, st heartbeat.Store, k state.ActivityKey, ctx context.Context) <-chan error {
	t.Helper()
	return runPumpWithin(t, st, k, ctx, 500*time.Millisecond)
}

// runPumpWithin is runPump with a lease of timeout.
func runPumpWithin(t *testing.T, st heartbeat.Store, k state.ActivityKey, ctx context.Context, timeout time.Duration) <-chan error {
	t.Helper()
	p, err := heartbeat.New(st, heartbeat.Config{Key: k, Owner: "me", Interval: 50 * time.Millisecond, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return done
}

func waitErr(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the pump did not return")
	}
	return nil
}

func TestBeatsUntilStopped(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	k := claimed(t, st)
	// The claim wrote the first heartbeat; the pump's come after it.
	a0, err := st.GetActivity(context.Background(), k)
	if err != nil || a0.HeartbeatTime.IsZero() {
		t.Fatalf("the claim wrote no heartbeat: %+v, %v", a0, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	began := state.Truncate(time.Now())
	done := runPump(t, st, k, ctx)
	var first time.Time
	deadline := time.Now().Add(20 * time.Second)
	for { // two different beats of the pump land
		a, err := st.GetActivity(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() && a.HeartbeatTime.After(a0.HeartbeatTime) {
			first = a.HeartbeatTime
		}
		if !first.IsZero() && a.HeartbeatTime.After(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeats did not keep landing: first %v, now %v", first, a.HeartbeatTime)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if first.Before(began) {
		t.Errorf("first heartbeat %v is older than the pump (%v)", first, began)
	}
	cancel()
	if err := waitErr(t, done); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
}

func TestLostWhenCancelledOrTimedOut(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	for _, to := range []state.ActivityState{state.CancelledRunning, state.TimedOut} {
		k := claimed(t, st)
		done := runPump(t, st, k, context.Background())
		time.Sleep(100 * time.Millisecond)
		if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
			From: []state.ActivityState{state.Running}, To: to}); err != nil {
			t.Fatal(err)
		}
		var lost *heartbeat.LostError
		if err := waitErr(t, done); !errors.As(err, &lost) || lost.State != to || lost.Expired {
			t.Errorf("after %s: Run = %v, want a LostError naming it", to, err)
		}
	}
}

// TestLostWhenCutOff runs the pump through a proxy and cuts it: the lease
// is lost once no beat has landed for the timeout, not before.
func TestLostWhenCutOff(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	k := claimed(t, st)
	proxy := dynamotest.NewProxy(t)
	cutOff := dynamodb.New(awsdynamodb.New(awsdynamodb.Options{
		Region: dynamotest.Region, BaseEndpoint: aws.String(proxy.Endpoint), RetryMaxAttempts: 1,
		Credentials:                     credentials.NewStaticCredentialsProvider(dynamotest.AccessKey, dynamotest.SecretKey, ""),
		DisableValidateResponseChecksum: true,
	}), dynamodb.Options{Prefix: st.Prefix()})
	done := runPump(t, cutOff, k, context.Background())
	time.Sleep(200 * time.Millisecond)
	proxy.Cut()
	cut := time.Now()
	err := waitErr(t, done)
	var lost *heartbeat.LostError
	if !errors.As(err, &lost) || !lost.Expired || !strings.Contains(err.Error(), "no heartbeat landed") {
		t.Fatalf("Run = %v, want an expired lease", err)
	}
	if d := time.Since(cut); d < 250*time.Millisecond {
		t.Errorf("lease lost %s after the cut; the last beat was at most 50ms before it, the timeout is 500ms", d)
	}
}

// lostAnswers lets every heartbeat land but, after the first, loses the
// answer of every one: without reading back, the pump would conclude that
// nothing lands and lose the lease.
type lostAnswers struct {
	heartbeat.Store
	n atomic.Int64
}

func (f *lostAnswers) Heartbeat(ctx context.Context, k state.ActivityKey, owner string, at time.Time) error {
	err := f.Store.Heartbeat(ctx, k, owner, at)
	if err == nil && f.n.Add(1) > 1 {
		return errors.New("connection reset by peer")
	}
	return err
}

// TestUnknownOutcomeIsReadBack: beats whose answers are lost but which
// landed count as landed; the lease holds for several timeouts.
func TestUnknownOutcomeIsReadBack(t *testing.T) {
	t.Parallel()
	store := dynamotest.NewStore(t, dynamodb.Options{})
	k := claimed(t, store)
	// Four timeouts of 2 s, beating every 50 ms: a timeout long enough
	// that a loaded machine's slow read-back is not a lost lease.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	f := &lostAnswers{Store: store}
	if err := waitErr(t, runPumpWithin(t, f, k, ctx, 2*time.Second)); err != nil {
		t.Errorf("Run = %v, want nil: every beat landed", err)
	}
	if f.n.Load() < 3 {
		t.Errorf("only %d beats: the lost answers stopped the pump", f.n.Load())
	}
}
