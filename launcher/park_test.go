package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// parkStores are the stores the parking tests run on: DynamoDB behind the
// fault proxy (throttling, 500s after applied writes, a lagging index)
// and the embedded store. Each comes with clean, the same tables without
// faults, for the test's own setup and checks: a call of the test's that
// the proxy fails after the SDK's tries is no part of what it proves.
func parkStores() map[string]func(t *testing.T) (st, clean state.Store) {
	return map[string]func(t *testing.T) (state.Store, state.Store){
		"dynamodb-behind-fault-proxy": func(t *testing.T) (state.Store, state.Store) {
			p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
			prefix := dynamotest.Prefix(t)
			clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := clean.Install(ctx, false); err != nil {
				t.Fatalf("install tables: %v", err)
			}
			p.SetFaults(dynamotest.Faults{Throttle: 0.02, Errors: 0.01, AfterWrite: 0.5, IndexLag: 300 * time.Millisecond})
			return dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), clean
		},
		"sqlite": func(t *testing.T) (state.Store, state.Store) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			return st, st
		},
	}
}

// TestPoolWaitersDoNotCrowdThePass: 2,000 activities wait, READY, on a
// full pool, more than a pass's window of READY activities; an activity
// readied after them, in no pool, starts in the first pass after it is
// READY, for the waiters were parked by the passes that met them. When
// the slot is freed behind the launchers' back, the monitor puts the
// oldest waiter back, and it starts.
func TestPoolWaitersDoNotCrowdThePass(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t)
			faulty := st != clean
			ctx := launchtest.Context(t)
			ps := clean.(state.PoolStore)
			if _, err := state.SetPool(ctx, ps, "full", 1, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			now := state.Truncate(time.Now())
			other := state.PoolHolder{ActivityExecID: "elsewhere::1", WorkflowExecID: "elsewhere::1", Slots: 1, Since: now, LeaseUntil: now.Add(time.Hour)}
			if err := state.AcquireSlots(ctx, ps, "full", other); err != nil {
				t.Fatal(err)
			}
			waiters, _ := launchtest.Start(t, clean, "name: waiters\nactivities:\n  wait: {pool: full, command: ['true']}\n")
			addWaiters(t, clean, waiters, 1999, now)

			backend := &launchtest.Counting{}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
			// The passes that meet the waiters park them, a window of
			// 1,000 at a time, until the listing has room (a lagging
			// index may show some a pass longer; a park write the proxy
			// failed leaves its waiter in a listing that crowds nothing).
			// A pass the proxy failed is followed by another, as in a
			// launcher's loop, and is not counted.
			passes, failed := 0, 0
			for {
				n, err := l.Once(ctx)
				if n != 0 || err != nil && (!faulty || failed == 5) {
					t.Fatalf("a pass over waiters of a full pool: launched %d, %v", n, err)
				}
				if err != nil {
					t.Logf("a pass behind the fault proxy: %v", err)
					failed++
					continue
				}
				passes++
				// The listing the launchers read: the lagging index.
				refs := readyListing(t, st)
				if len(refs) < 1000 {
					break
				}
				if passes == 6 {
					t.Fatalf("after %d passes %d waiters are still in the READY listing", passes, len(refs))
				}
			}
			t.Logf("the waiters were parked by %d passes", passes)
			parked, err := clean.(state.PoolQueue).Parked(ctx, "full", 0)
			if err != nil || len(parked) < 1001 {
				t.Fatalf("%d waiters parked (%v), want most of the 2,000", len(parked), err)
			}
			t.Logf("%d waiters parked", len(parked))

			later, _ := launchtest.Start(t, clean, "name: later\nactivities:\n  go: {command: ['true']}\n")
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(later, "go"), WorkflowExecID: later}
			waitListed(t, st, k)
			// A pass the proxy failed (its listing, or the claim) read
			// nothing or launched nothing: the first pass that did must
			// launch it.
			for failed := 0; ; failed++ {
				n, err := l.Once(ctx)
				if faulty && err != nil && n == 0 && failed < 5 {
					t.Logf("a pass behind the fault proxy: %v", err)
					continue
				}
				if err != nil || n != 1 {
					t.Fatalf("the first pass after it was READY launched %d (%v), want the launchable one", n, err)
				}
				break
			}
			if a := launchtest.Activity(t, clean, later, "go"); a.State == state.Ready {
				t.Fatalf("the launchable activity is still READY")
			}

			// The holder's slot is freed by someone who puts no waiter
			// back: the monitor's sweep does.
			if err := state.ReleaseSlots(ctx, ps, "full", other.Key()); err != nil {
				t.Fatal(err)
			}
			oldest := oldestOf(t, clean, waiters)
			// A sweep judges each of the 2,000 parked waiters: behind the
			// proxy one of its calls may fail after the SDK's tries, and
			// the sweep returns the error or logs a refill it could not
			// write. The next sweep finishes it, as a monitor's loop does;
			// on a store without faults one sweep must.
			m := monitor.New(st, monitor.Config{})
			for sweeps := 1; ; sweeps++ {
				_, err := m.Sweep(ctx)
				if err != nil && !faulty {
					t.Fatal(err)
				}
				if listedWithin(t, st, oldest, 20*time.Second) {
					break
				}
				if !faulty || sweeps == 5 {
					t.Fatalf("after %d sweeps (the last: %v) the oldest waiter %s is not back in the READY listing", sweeps, err, oldest.ActivityExecID)
				}
				t.Logf("sweep %d behind the fault proxy left the oldest waiter parked (%v): sweeping again", sweeps, err)
			}
			// A waiter back in the listing is met anew: the first pass
			// learns its pool, the next lets it in. A pass behind the
			// fault proxy that fails is followed by another, and is not
			// one of the two.
			launched := 0
			for passes, failed := 0, 0; passes < 3; passes++ {
				n, err := l.Once(ctx)
				if err != nil && (!faulty || failed == 5) {
					t.Fatal(err)
				}
				if launched += n; launched > 0 {
					break
				}
				if err != nil {
					t.Logf("a pass behind the fault proxy: %v", err)
					failed++
					passes--
				}
			}
			if launched != 1 {
				t.Fatalf("the passes after the sweep launched %d, want the oldest waiter", launched)
			}
			if got := backend.Launches()[oldest]; got != 1 {
				t.Errorf("the oldest waiter was launched %d times, want 1: %v", got, backend.Jobs())
			}
			if s, _ := state.ReadPool(ctx, ps, "full"); s == nil || s.Held != 1 {
				t.Errorf("pool after the oldest waiter's launch: %+v", s)
			}
		})
	}
}

// addWaiters writes n more READY items of the activity wait, as a retry
// writer would, each readied a millisecond after the last.
func addWaiters(t *testing.T, st state.Store, wf string, n int, at time.Time) {
	t.Helper()
	ctx := launchtest.Context(t)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a := &state.ActivityExec{
				ActivityKey:  state.ActivityKey{ActivityExecID: fmt.Sprintf("wait::00000000-0000-4000-8000-%012d", i), WorkflowExecID: wf},
				WorkflowName: "waiters", ActivityName: "wait", State: state.Ready, Attempt: 1, StateTime: at.Add(time.Duration(i+1) * time.Millisecond),
			}
			// A write the proxy answered with a 500 after applying it
			// is refused when repeated: the item is there.
			if err := st.CreateActivity(ctx, a); err != nil && !errors.Is(err, state.ErrConflict) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("write a waiter: %v", err)
	}
}

// waitListed waits until the READY listing (an index on DynamoDB) has k.
func waitListed(t *testing.T, st state.Store, k state.ActivityKey) {
	t.Helper()
	if !listedWithin(t, st, k, time.Minute) {
		t.Fatalf("%s never showed in the READY listing", k.ActivityExecID)
	}
}

// listedWithin reports whether the READY listing of st has k within d.
// It reads the listing the launchers read (behind the fault proxy, the
// lagging index through the faulty side), and reads it again when a read
// fails.
func listedWithin(t *testing.T, st state.Store, k state.ActivityKey, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		refs, err := st.ActivitiesInState(launchtest.Context(t), state.ActivityQuery{State: state.Ready})
		if err == nil && slices.ContainsFunc(refs, func(r state.ActivityRef) bool { return r.ActivityKey == k }) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyListing is the READY listing of st (the launchers' view), read
// again when a read fails, for at most a minute.
func readyListing(t *testing.T, st state.Store) []state.ActivityRef {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		refs, err := st.ActivitiesInState(launchtest.Context(t), state.ActivityQuery{State: state.Ready})
		if err == nil {
			return refs
		}
		if time.Now().After(deadline) {
			t.Fatalf("list READY activities: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oldestOf is the key of the activity of wf that became READY first.
func oldestOf(t *testing.T, st state.Store, wf string) state.ActivityKey {
	t.Helper()
	acts, err := st.Activities(launchtest.Context(t), wf)
	if err != nil {
		t.Fatal(err)
	}
	var first *state.ActivityExec
	for _, a := range acts {
		if first == nil || a.StateTime.Before(first.StateTime) || a.StateTime.Equal(first.StateTime) && a.ActivityExecID < first.ActivityExecID {
			first = a
		}
	}
	return first.ActivityKey
}
