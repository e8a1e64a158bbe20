package launcher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
)

// promptly bounds how long after its not_before a parked retry due soon
// starts, with a launcher running: docs/retries.md says a window (1 s) and
// a pass interval (1 s); the bound is generous for a loaded machine, where
// a pass behind the fault proxy may take seconds.
const promptly = 30 * time.Second

// TestShortRetriesDoNotCrowdThePass: 3,000 retries wait out a delay of 55
// seconds, READY, more than a pass's window of READY activities and older
// than an activity readied after them; the first pass launches that
// activity, and none of the retries, and the READY listing holds none of
// them.
func TestShortRetriesDoNotCrowdThePass(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t) // clean: the test's own writes and reads, without faults
			ctx := launchtest.Context(t)
			retries, _ := launchtest.Start(t, clean, "name: retries\nactivities:\n  first: {command: ['true']}\n"+
				"  flaky: {depends_on: [first], command: ['true'], retry: {max_attempts: 3, interval: 55s}}\n")
			// Each is due 55 s after it is written, in whole seconds, as
			// other clients write: the machine may be slow to write them.
			addRetriesAt(t, clean, retries, "late", 3000, 55*time.Second)
			later, _ := launchtest.Start(t, clean, "name: later\nactivities:\n  go: {command: ['true']}\n")
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(later, "go"), WorkflowExecID: later}
			waitListed(t, st, k)
			if n := len(readyListing(t, clean)); n > 2 {
				t.Fatalf("the READY listing holds %d items, want only the 2 launchable ones", n)
			}
			b := &timedBackend{at: map[state.ActivityKey]time.Time{}}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: b}})
			if _, err := l.Once(ctx); err != nil {
				t.Fatal(err)
			}
			if _, ok := b.launched(k); !ok {
				t.Fatalf("the first pass did not launch the launchable activity (it launched %d activities)", b.count())
			}
			checkNotEarly(t, clean, b, retries, "late", 3000)
		})
	}
}

// TestShortRetriesStartPromptly: retries due in seconds, written as items
// and made by a retry policy after a failed launch, wait parked and each
// starts within promptly of its not_before under a running launcher, and
// none before it.
func TestShortRetriesStartPromptly(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t) // clean: the test's own writes and reads, without faults
			ctx := launchtest.Context(t)
			retries, _ := launchtest.Start(t, clean, "name: retries\nactivities:\n  first: {command: ['true']}\n"+
				"  flaky: {depends_on: [first], command: ['true'], retry: {max_attempts: 3, interval: 12s}}\n")
			addRetriesAt(t, clean, retries, "soon", 100, 12*time.Second)
			policy, _ := launchtest.Start(t, clean, "name: policy\nactivities:\n  a: {command: ['true'], retry: {max_attempts: 2, interval: 6s}}\n")
			waitListed(t, st, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(policy, "a"), WorkflowExecID: policy})
			if n := len(readyListing(t, clean)); n > 2 {
				t.Fatalf("the READY listing holds %d items, want only the 2 launchable ones", n)
			}
			b := &timedBackend{failFirst: policy, at: map[state.ActivityKey]time.Time{}}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: b}})
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- l.Run(rctx) }()
			defer func() {
				cancel()
				<-done
			}()
			retry := state.ActivityKey{ActivityExecID: state.RetryIDFor(state.ActivityExecIDFor(policy, "a")), WorkflowExecID: policy}
			deadline := time.Now().Add(12*time.Second + 2*promptly)
			for {
				all := true
				for i := range 100 {
					if _, ok := b.launched(retryKey(retries, "soon", i)); !ok {
						all = false
					}
				}
				if _, ok := b.launched(retry); ok && all {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d activities launched; not every retry due soon, or not the policy's retry", b.count())
				}
				time.Sleep(100 * time.Millisecond)
			}
			checkPrompt(t, clean, b, retries, "soon", 100)
			a, err := clean.GetActivity(ctx, retry)
			if err != nil {
				t.Fatal(err)
			}
			if at, _ := b.launched(retry); at.Before(a.NotBefore) || at.After(a.NotBefore.Add(promptly)) {
				t.Errorf("the policy's retry due at %s launched at %s", a.NotBefore.Format(time.StampMilli), at.Format(time.StampMilli))
			}
		})
	}
}

// checkNotEarly fails the test if one of the n retries of tag in wf was
// launched before its not_before.
func checkNotEarly(t *testing.T, st state.Store, b *timedBackend, wf, tag string, n int) {
	t.Helper()
	for i := range n {
		k := retryKey(wf, tag, i)
		if at, ok := b.launched(k); ok {
			if a, err := st.GetActivity(launchtest.Context(t), k); err != nil || at.Before(a.NotBefore) {
				t.Fatalf("retry %s %d launched at %s, before its not_before (%+v, %v)", tag, i, at.Format(time.StampMilli), a, err)
			}
		}
	}
}

// checkPrompt fails the test unless each of the n retries of tag in wf was
// launched at or after its not_before, and within promptly of it.
func checkPrompt(t *testing.T, st state.Store, b *timedBackend, wf, tag string, n int) {
	t.Helper()
	for i := range n {
		k := retryKey(wf, tag, i)
		a, err := st.GetActivity(launchtest.Context(t), k)
		if err != nil {
			t.Fatal(err)
		}
		if at, ok := b.launched(k); !ok || at.Before(a.NotBefore) || at.After(a.NotBefore.Add(promptly)) {
			t.Errorf("retry %s %d due at %s launched at %s (%v)", tag, i, a.NotBefore.Format(time.StampMilli), at.Format(time.StampMilli), ok)
		}
	}
}

// retryKey is the key of the i-th retry that addRetriesAt wrote in wf.
func retryKey(wf, tag string, i int) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: fmt.Sprintf("flaky::%s-0000-4000-8000-%012d", tagHex(tag), i), WorkflowExecID: wf}
}

func tagHex(tag string) string {
	if tag == "late" {
		return "1a7e0000"
	}
	return "50000000"
}

// addRetriesAt writes n READY retries of the activity flaky, each created
// at the whole second it is written and due delay later, as a retry
// writer would.
func addRetriesAt(t *testing.T, st state.Store, wf, tag string, n int, delay time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			at := time.Now().UTC().Truncate(time.Second)
			errs <- tryCreateRetry(t, st, retryKey(wf, tag, i), at, at.Add(delay))
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

// timedBackend records when each activity was first launched, and fails
// the first attempt of the activities of one workflow.
type timedBackend struct {
	failFirst string

	mu sync.Mutex
	at map[state.ActivityKey]time.Time
}

func (b *timedBackend) Launch(_ context.Context, j launcher.Job) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.at[j.Key]; !ok {
		b.at[j.Key] = time.Now()
	}
	if j.Key.WorkflowExecID == b.failFirst && j.Attempt <= 1 {
		return "", errors.New("no such image")
	}
	return "test:" + j.ActivityName, nil
}

func (b *timedBackend) launched(k state.ActivityKey) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	at, ok := b.at[k]
	return at, ok
}

func (b *timedBackend) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.at)
}

// TestMissedShortRetriesArePutBackBySweeps: a retry due soon whose second
// passed while no launcher ran (its writer's delay 20 s, due 10 s ago) is
// not in the READY listing; the monitor's sweeps, which read a few
// windows each, put it back within a round, and a pass launches it.
func TestMissedShortRetriesArePutBackBySweeps(t *testing.T) {
	t.Parallel()
	for name, newStore := range parkStores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st, clean := newStore(t) // clean: the test's own writes and reads, without faults
			ctx := launchtest.Context(t)
			wf, _ := launchtest.Start(t, clean, "name: retries\nactivities:\n  first: {command: ['true']}\n"+
				"  flaky: {depends_on: [first], command: ['true'], retry: {max_attempts: 3, interval: 20s}}\n")
			at := time.Now().UTC().Truncate(time.Second).Add(-30 * time.Second)
			k := retryKey(wf, "soon", 0)
			createRetry(t, clean, k, at, at.Add(20*time.Second))
			time.Sleep(time.Second) // longer than the index lags
			if listed(t, clean, k) {
				t.Fatalf("the retry due soon is in the READY listing before any put back")
			}
			m := monitor.New(st, monitor.Config{AdoptPages: -1})
			for sweeps := 0; !listed(t, clean, k); sweeps++ {
				// A round of 64 windows, 4 a sweep; a sweep the proxy
				// failed is followed by the next.
				if sweeps == 40 {
					t.Fatalf("after %d sweeps the missed retry is not in the READY listing", sweeps)
				}
				if _, err := m.Sweep(ctx); err != nil {
					t.Logf("sweep: %v", err)
				}
				time.Sleep(400 * time.Millisecond) // longer than the index lags
			}
			b := &timedBackend{at: map[state.ActivityKey]time.Time{}}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: b}})
			for try := 0; ; try++ {
				if _, ok := b.launched(k); ok {
					break
				}
				if try == 5 {
					t.Fatalf("5 passes did not launch the retry put back")
				}
				if _, err := l.Once(ctx); err != nil {
					t.Logf("pass: %v", err)
				}
			}
		})
	}
}
