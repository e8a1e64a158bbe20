package launcher_test

import (
	"context"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// deadlineReads answers ActivitiesInState as a store does: it fails once
// its context has ended, and remembers the deadline it was given.
type deadlineReads struct{ left time.Duration }

func (r *deadlineReads) ActivitiesInState(ctx context.Context, _ state.ActivityQuery) ([]state.ActivityRef, error) {
	if d, ok := ctx.Deadline(); ok {
		r.left = time.Until(d)
	}
	return nil, ctx.Err()
}

// TestCheckStoreBoundsItsReadByDefault: a store check given no bound of its
// own is still bounded, by the default 20 s, rather than by none at all,
// which would fail every check; one given a bound keeps to it.
func TestCheckStoreBoundsItsReadByDefault(t *testing.T) {
	r := &deadlineReads{}
	if err := launcher.CheckStore(context.Background(), r, "test store", 0); err != nil {
		t.Fatalf("CheckStore on a store that answers: %v", err)
	}
	if r.left < 10*time.Second || r.left > 20*time.Second {
		t.Errorf("the check had %s left, want the default of 20s", r.left)
	}
	r = &deadlineReads{}
	if err := launcher.CheckStore(context.Background(), r, "test store", 3*time.Second); err != nil || r.left > 3*time.Second {
		t.Errorf("a bound of 3s: err %v, %s left", err, r.left)
	}
}

// answers is a state index read that returns what it was given.
type answers struct{ err error }

func (a answers) ActivitiesInState(context.Context, state.ActivityQuery) ([]state.ActivityRef, error) {
	return nil, a.err
}

// TestCheckStorePassesOverAMalformedItem: a read that skipped an item it
// could not decode reached the store, so the launcher starts (one bad
// item must never stop the fleet); a read that failed stops it. A loaded
// CI run had the launcher exit at start once the monitor's adoption scan
// had put a foreign malformed READY item in the index.
func TestCheckStorePassesOverAMalformedItem(t *testing.T) {
	skipped := &state.SkippedError{Items: []*state.DecodeError{{Table: "activity_exec", Key: "bad", ID: "bad", Attr: "state_time_epoch", Err: "out of range"}}}
	if err := launcher.CheckStore(context.Background(), answers{skipped}, "test store", 0); err != nil {
		t.Errorf("CheckStore with a malformed item read: %v; want the launcher to start", err)
	}
	if err := launcher.CheckStore(context.Background(), answers{context.DeadlineExceeded}, "test store", 0); err == nil {
		t.Error("CheckStore with a read that failed: no error; want the launcher stopped")
	}
}
