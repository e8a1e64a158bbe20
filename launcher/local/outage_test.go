package local_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
)

// downStore answers every claim to RUNNING as a store that does not
// answer would, and notes which activities were claimed.
type downStore struct {
	state.Store
	mu      sync.Mutex
	claimed map[string]bool
}

func (s *downStore) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	if c.To != state.Running {
		return s.Store.UpdateActivity(ctx, k, c)
	}
	s.mu.Lock()
	s.claimed[k.ActivityExecID] = true
	s.mu.Unlock()
	return nil, fmt.Errorf("update activity %s: %w", k.ActivityExecID, state.ErrUnavailable)
}

func (s *downStore) tried() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claimed)
}

// TestInlineStoreOutageStopsThePass: when the inline claim of a first
// attempt finds the store unusable (it retries for a minute), the pass
// hands out no more launches, which would wait for the store the same,
// each its minute, and each log an error in the log of an activity that
// never ran. With one worker, the second of three activities is not
// tried after the first's claim gave up.
func TestInlineStoreOutageStopsThePass(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores()[:2] { // the store's outage is this test's own
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			id, _ := launchtest.Start(t, own, "name: outage\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"]}\n  c: {command: [\"true\"]}\n")
			ds := &downStore{Store: st, claimed: map[string]bool{}}
			ss := &staleStore{Store: st}
			runStale(t, ds, ss, launcher.Config{Interval: 10 * time.Minute, Workers: 1})
			deadline := time.Now().Add(time.Minute)
			for ds.tried() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no claim was tried within a minute")
				}
				time.Sleep(50 * time.Millisecond)
			}
			// The first claim retries for a minute, then gives up; a pass
			// that went on would try the next at once.
			time.Sleep(80 * time.Second)
			if n := ds.tried(); n != 1 {
				t.Errorf("%d activities' claims were tried; want 1: the pass went on after the store could not be used", n)
			}
			if n := ss.listings.Load(); n != 1 {
				t.Errorf("the launcher listed %d times; want 1 (its interval is 10 minutes)", n)
			}
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				if a.State != state.Ready {
					t.Errorf("%s: %s; want READY, left for a later pass", a.ActivityName, a.State)
				}
			}
		})
	}
}
