package launcher

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestHandoffPassKeepsPoolWaiters: a pass that tries only handed keys
// keeps what the launcher knows of the pools' waiters (it did not list
// them, so it cannot tell they left).
func TestHandoffPassKeepsPoolWaiters(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	l := New(st, Config{Interval: time.Minute})
	waiter := poolWaiter{key: state.ActivityKey{ActivityExecID: "waiter::1", WorkflowExecID: "wf::1"}, pool: "p", slots: 1, since: time.Now()}
	l.pools.remember(waiter)
	l.Handoff([]state.ActivityKey{{ActivityExecID: "handed::1", WorkflowExecID: "wf::2"}})
	p, err := l.passOf(ctx, false)
	if p != nil {
		p.wg.Wait()
	}
	if err != nil {
		t.Fatal(err)
	}
	l.pools.mu.Lock()
	w, known := l.pools.byID[waiter.key.ActivityExecID]
	read := l.pools.read[waiter.key.ActivityExecID]
	l.pools.mu.Unlock()
	if !known || w.key != waiter.key || !read {
		t.Errorf("after a handoff pass the pool waiter is known %v (%+v), read %v; want it remembered as the listing pass left it", known, w, read)
	}
	if got := l.Listings(); got != 0 {
		t.Errorf("the handoff pass listed the READY index %d times, want 0", got)
	}
	if keys, dropped := l.handoff.pending(); keys || dropped {
		t.Errorf("after the pass the handoff holds keys %v, dropped %v; want it empty", keys, dropped)
	}
}
