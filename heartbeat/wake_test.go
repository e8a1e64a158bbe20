package heartbeat_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestWakeFindsACancellationAtOnce: on the embedded store, the write that
// cancels a running activity wakes the pump watching it, which beats at
// once and reports the lease lost, long before its next regular beat.
func TestWakeFindsACancellationAtOnce(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	k := claimed(t, st)
	changed, stop, err := st.WatchActivity(k)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	p, err := heartbeat.New(st, heartbeat.Config{Key: k, Owner: "me", Interval: time.Hour, Timeout: 3 * time.Hour, Wake: changed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.CancelledRunning, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var lost *heartbeat.LostError
		if !errors.As(err, &lost) || lost.State != state.CancelledRunning {
			t.Errorf("pump: %v, want the lease lost to CANCELLED_RUNNING", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the pump did not hear the cancellation within 10 s (its next beat is an hour away)")
	}
	if left, _ := filepath.Glob(st.Path() + "-wake/*"); len(left) != 0 {
		t.Errorf("wake addresses left after the cancellation: %v", left)
	}
}
