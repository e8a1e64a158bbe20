package heartbeat_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// countingStore counts the beats that carried progress and those that
// did not.
type countingStore struct {
	heartbeat.Store
	mu               sync.Mutex
	bare, progressed []string
}

func (c *countingStore) Heartbeat(ctx context.Context, k state.ActivityKey, owner string, at time.Time) error {
	c.mu.Lock()
	c.bare = append(c.bare, "")
	c.mu.Unlock()
	return c.Store.Heartbeat(ctx, k, owner, at)
}

func (c *countingStore) UpdateActivity(ctx context.Context, k state.ActivityKey, ch state.ActivityChange) (*state.ActivityExec, error) {
	c.mu.Lock()
	c.progressed = append(c.progressed, ch.Progress)
	c.mu.Unlock()
	return c.Store.UpdateActivity(ctx, k, ch)
}

// TestProgressRidesOnTheNextBeat: a changed progress goes with the next
// beat, once; an unchanged, empty or oversize one leaves the beats bare.
func TestProgressRidesOnTheNextBeat(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	k := claimed(t, st)
	cs := &countingStore{Store: st}
	var mu sync.Mutex
	progress := ""
	set := func(p string) { mu.Lock(); progress = p; mu.Unlock() }
	p, err := heartbeat.New(cs, heartbeat.Config{Key: k, Owner: "me", Interval: 30 * time.Millisecond, Timeout: time.Second,
		Progress: func() string { mu.Lock(); defer mu.Unlock(); return progress }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	waitFor := func(what string, ok func(a *state.ActivityExec) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			a, err := st.GetActivity(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if ok(a) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the item holds progress %q", what, a.Progress)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(150 * time.Millisecond) // bare beats
	set(`{"done": 1}`)
	waitFor("the first progress", func(a *state.ActivityExec) bool { return a.Progress == `{"done": 1}` && !a.ProgressTime.IsZero() })
	time.Sleep(150 * time.Millisecond) // unchanged: bare beats again
	set(strings.Repeat("x", state.MaxProgress+1))
	time.Sleep(150 * time.Millisecond) // oversize: not carried
	set("step 2")
	waitFor("the second progress", func(a *state.ActivityExec) bool { return a.Progress == "step 2" })
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := waitErr(t, done); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if strings.Join(cs.progressed, "|") != `{"done": 1}|step 2` {
		t.Errorf("beats with progress carried %q; want each change once", cs.progressed)
	}
	if len(cs.bare) < 6 {
		t.Errorf("%d bare beats; want the others bare", len(cs.bare))
	}
}
