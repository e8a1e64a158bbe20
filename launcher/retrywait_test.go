package launcher_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
)

// TestWaitingRetriesDoNotCrowdThePass: 2,000 retries wait out a delay of
// an hour, READY, more than a pass's window of READY activities, and a
// for_each map of 2,000 elements is held back by max_running: 3; an
// activity readied after them all starts in the very first pass, for the
// retries were written parked and the held elements were never written.
// A parked retry whose not_before has passed is put back by the monitor's
// sweep, and the next pass starts it; the others stay parked.
func TestWaitingRetriesDoNotCrowdThePass(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t) // clean: the test's own writes and reads, without faults
			ctx := launchtest.Context(t)
			now := state.Truncate(time.Now())
			retries, _ := launchtest.Start(t, clean, "name: retries\nactivities:\n  first: {command: ['true']}\n"+
				"  flaky: {depends_on: [first], command: ['true'], retry: {max_attempts: 3, interval: 1h}}\n")
			addRetries(t, clean, retries, 2000, now, now.Add(time.Hour))
			// One waited out its delay while no monitor ran: it is the
			// oldest READY item of all.
			due := state.ActivityKey{ActivityExecID: "flaky::00000000-0000-4000-8000-999999999999", WorkflowExecID: retries}
			createRetry(t, clean, due, now.Add(-2*time.Hour), now.Add(-time.Hour))
			held, _ := launchtest.Start(t, clean, "name: held\nactivities:\n  each: {for_each: {count: 2000}, max_running: 3, command: ['true']}\n")

			later, _ := launchtest.Start(t, clean, "name: later\nactivities:\n  go: {command: ['true']}\n")
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(later, "go"), WorkflowExecID: later}
			waitListed(t, st, k)
			backend := &launchtest.Counting{}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
			if _, err := l.Once(ctx); err != nil {
				t.Fatal(err)
			}
			if got := backend.Launches()[k]; got != 1 {
				t.Fatalf("the first pass launched the launchable activity %d times, want 1 (it launched %d activities)", got, len(backend.Launches()))
			}
			for key := range backend.Launches() {
				// The due one may go: on the embedded store the launchers
				// put back every parked retry that is due.
				if key.WorkflowExecID == retries && key.ActivityExecID != state.ActivityExecIDFor(retries, "first") && key != due {
					t.Fatalf("the first pass launched the retry %s, which waits out its delay", key.ActivityExecID)
				}
			}
			elements := 0
			for key := range backend.Launches() {
				if key.WorkflowExecID == held {
					elements++
				}
			}
			if elements > 3 {
				t.Fatalf("the first pass launched %d elements of a map with max_running 3", elements)
			}

			// The monitor puts back the retry that is due, and only it. A
			// sweep the proxy failed (or whose put back it failed) is
			// followed by the next, as a monitor's would be.
			for try := 0; backend.Launches()[due] == 0 && !listedWithin(t, st, due, 5*time.Second); try++ {
				if try == 5 {
					t.Fatalf("after %d sweeps the due retry is not in the READY listing", try)
				}
				if _, err := monitor.New(st, monitor.Config{AdoptPages: -1}).Sweep(ctx); err != nil {
					t.Logf("sweep: %v", err)
				}
			}
			launched := 0
			for range 3 {
				if _, err := l.Once(ctx); err != nil {
					t.Fatal(err)
				}
				if launched = backend.Launches()[due]; launched > 0 {
					break
				}
			}
			if launched != 1 {
				t.Fatalf("the passes after the sweep launched the due retry %d times, want 1", launched)
			}
			for key := range backend.Launches() {
				if key.WorkflowExecID == retries && key != due && key.ActivityExecID != state.ActivityExecIDFor(retries, "first") {
					t.Fatalf("retry %s was launched an hour before its not_before", key.ActivityExecID)
				}
			}
			waiting, err := clean.(state.RetryQueue).WaitingRetries(ctx)
			if err != nil || len(waiting) < 1900 {
				t.Fatalf("%d retries are listed waiting (%v), want the 2,000 not due", len(waiting), err)
			}
		})
	}
}

// addRetries writes n READY retries of the activity flaky, as a retry
// writer would, each created a millisecond after the last and due at
// notBefore.
func addRetries(t *testing.T, st state.Store, wf string, n int, at, notBefore time.Time) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			k := state.ActivityKey{ActivityExecID: fmt.Sprintf("flaky::00000000-0000-4000-8000-%012d", i), WorkflowExecID: wf}
			errs <- tryCreateRetry(t, st, k, at.Add(time.Duration(i+1)*time.Millisecond), notBefore)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("write a retry: %v", err)
		}
	}
}

func createRetry(t *testing.T, st state.Store, k state.ActivityKey, at, notBefore time.Time) {
	t.Helper()
	if err := tryCreateRetry(t, st, k, at, notBefore); err != nil {
		t.Fatalf("write a retry: %v", err)
	}
}

func tryCreateRetry(t *testing.T, st state.Store, k state.ActivityKey, at, notBefore time.Time) error {
	a := &state.ActivityExec{ActivityKey: k, WorkflowName: "retries", ActivityName: "flaky", State: state.Ready, Attempt: 2,
		RetryOf: "flaky::" + k.WorkflowExecID, StateTime: at, NotBefore: notBefore}
	// A write the proxy answered with a 500 after applying it is refused
	// when repeated: the item is there.
	if err := st.CreateActivity(launchtest.Context(t), a); err != nil && !errors.Is(err, state.ErrConflict) {
		return err
	}
	return nil
}

// TestARetryOfAMinuteWaitsParked: a launch that fails is retried a minute
// later by its policy; the retry is written parked, out of the READY
// listing, and a monitor sweep before its not_before leaves it there. A
// sweep whose clock is past it puts it back, and a launcher whose clock
// is not still leaves it alone.
func TestARetryOfAMinuteWaitsParked(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t) // clean: the test's own writes and reads, without faults
			ctx := launchtest.Context(t)
			id, _ := launchtest.Start(t, clean, "name: w\nactivities:\n  a: {command: [\"true\"], retry: {max_attempts: 2, interval: 1m}}\n")
			failing := &launchtest.Counting{Err: errors.New("no such image")}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: failing}})
			// The index lags, and the proxy fails some calls: pass until
			// the launch has failed and been retried, bounded.
			waitListed(t, st, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
			first := launchtest.Activity(t, clean, id, "a")
			for try := 0; first.RetriedBy == ""; try++ {
				if try == 10 {
					t.Fatalf("after %d passes the first attempt is %s and was not retried", try, first.State)
				}
				if first.State.Terminal() {
					// Its failure was recorded but its retry's write
					// failed: the monitor's sweep makes it.
					if _, err := monitor.New(st, monitor.Config{AdoptPages: -1}).Sweep(ctx); err != nil {
						t.Logf("sweep: %v", err)
					}
				} else if _, err := l.Once(ctx); err != nil {
					t.Logf("pass: %v", err)
				}
				first = launchtest.Activity(t, clean, id, "a")
			}
			k := state.ActivityKey{ActivityExecID: state.RetryIDFor(state.ActivityExecIDFor(id, "a")), WorkflowExecID: id}
			retry, err := clean.GetActivity(ctx, k)
			if err != nil || retry.State != state.Ready || retry.NotBefore.Sub(retry.StateTime) < time.Minute {
				t.Fatalf("retry: %+v %v; want READY a minute ahead", retry, err)
			}
			waitWaiting(t, st, k)
			if listed(t, st, k) {
				t.Fatalf("the retry waiting a minute is in the READY listing")
			}
			// Behind the fault proxy a sweep's listing can fail past the
			// SDK's retries: sweep again, as the monitor's next sweep would.
			m := monitor.New(st, monitor.Config{AdoptPages: -1})
			for try := 0; ; try++ {
				_, err := m.Sweep(ctx)
				if err == nil {
					break
				}
				if try == 10 {
					t.Fatalf("no sweep of 10 succeeded: %v", err)
				}
				t.Logf("sweep: %v", err)
			}
			if a, err := clean.GetActivity(ctx, k); err != nil || a.State != state.Ready {
				t.Fatalf("after a sweep before its not_before the retry is %+v (%v)", a, err)
			}
			time.Sleep(time.Second) // longer than the index lags
			if listed(t, st, k) {
				t.Fatalf("a sweep before the retry's not_before put it back")
			}
			// A put back that the proxy failed is made by the next sweep.
			later := monitor.New(st, monitor.Config{AdoptPages: -1, Now: func() time.Time { return retry.NotBefore.Add(time.Second) }})
			deadline := time.Now().Add(time.Minute)
			for !listed(t, st, k) {
				if time.Now().After(deadline) {
					t.Fatalf("sweeps after the retry's not_before never put it back in the READY listing")
				}
				if _, err := later.Sweep(ctx); err != nil {
					t.Logf("sweep: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			ok := &launchtest.Counting{}
			l = launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: ok}})
			if n, err := l.Once(ctx); err != nil || (n != 0 && time.Now().Before(retry.NotBefore)) {
				t.Fatalf("a pass before the retry's not_before launched %d (%v)", n, err)
			}
		})
	}
}

// waitWaiting waits until the waiting retries' listing has k.
func waitWaiting(t *testing.T, st state.Store, k state.ActivityKey) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		refs, err := st.(state.RetryQueue).WaitingRetries(launchtest.Context(t))
		if err != nil && time.Now().After(deadline) {
			t.Fatal(err)
		}
		for _, r := range refs { // a failed read is read again
			if r.ActivityKey == k {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed among the waiting retries", k.ActivityExecID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listed reports whether the READY listing has k now.
func listed(t *testing.T, st state.Store, k state.ActivityKey) bool {
	t.Helper()
	// Behind the fault proxy a read can fail: it is read again, a few
	// times, as the launchers' next pass would.
	var err error
	for try := 0; try < 5; try++ {
		var refs []state.ActivityRef
		if refs, err = st.ActivitiesInState(launchtest.Context(t), state.ActivityQuery{State: state.Ready}); err == nil {
			return slices.ContainsFunc(refs, func(r state.ActivityRef) bool { return r.ActivityKey == k })
		}
	}
	t.Fatal(err)
	return false
}
