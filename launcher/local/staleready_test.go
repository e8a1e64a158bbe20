package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// staleStore counts the READY listings a launcher makes through it, and
// adds to each the activities in stale, as a READY index that lags
// behind their claims would list them.
type staleStore struct {
	state.Store
	listings atomic.Int64
	mu       sync.Mutex
	stale    []state.ActivityRef
}

func (s *staleStore) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	refs, err := s.Store.ActivitiesInState(ctx, q)
	if q.State != state.Ready {
		return refs, err
	}
	s.listings.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(refs, s.stale...), err
}

// add makes the listings show the activities named of the workflow id
// READY from now on.
func (s *staleStore) add(id string, names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.stale = append(s.stale, state.ActivityRef{ActivityKey: state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, n), WorkflowExecID: id}})
	}
}

// staleReadyStores are the stores of the tests of stale READY entries:
// the embedded store and DynamoDB Local, whose listings get the stale
// entries a test adds (lag 0), and DynamoDB Local behind the fault proxy,
// whose READY index lags the table by lag: every activity claimed is
// listed READY for that long after its claim, and nothing is added.
func staleReadyStores(lag time.Duration) []struct {
	name string
	lag  time.Duration
	open func(t *testing.T) (st, own state.Store)
} {
	return []struct {
		name string
		lag  time.Duration
		open func(t *testing.T) (st, own state.Store)
	}{
		{"sqlite", 0, func(t *testing.T) (state.Store, state.Store) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return st, st
		}},
		{"dynamodb", 0, func(t *testing.T) (state.Store, state.Store) {
			st := dynamotest.NewStore(t, dynamodb.Options{})
			return st, st
		}},
		{"dynamodb behind the fault proxy, its index lagging", lag, func(t *testing.T) (state.Store, state.Store) {
			proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{IndexLags: map[string]time.Duration{"state-shard-index": lag}})
			prefix := dynamotest.Prefix(t)
			setup := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			if _, err := setup.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), setup
		}},
	}
}

// runStale runs a launcher whose READY listings go through ss and whose
// local backend supervises inline on st, until the test ends.
func runStale(t *testing.T, st state.Store, ss *staleStore, cfg launcher.Config) {
	t.Helper()
	lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
		Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
	l := local.NewLauncher(ss, cfg, lb, nil)
	ctx, cancel := context.WithCancel(launchtest.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		lb.Stop(30 * time.Second)
	})
}

// waitState waits up to a minute for the activity name of the workflow id
// to be in want.
func waitState(t *testing.T, own state.Store, id, name string, want state.ActivityState) {
	t.Helper()
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
	deadline := time.Now().Add(time.Minute)
	for {
		a, err := own.GetActivity(launchtest.Context(t), k)
		if err == nil && a.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not %s within a minute: %v, %v", name, want, a, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestInlineStaleReadyEntryDoesNotLoopListings: under --max-running, a
// READY entry of an activity that has completed (an index that lags) is
// tried, its inline claim refused, and nothing more: the refused run
// frees no slot, so it wakes no listing pass, which would find the same
// entry and try it again at once. The launcher lists about once an
// interval (10 s), not thousands of times.
func TestInlineStaleReadyEntryDoesNotLoopListings(t *testing.T) {
	t.Parallel()
	for _, tc := range staleReadyStores(15 * time.Second) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			// hold keeps the workflow RUNNING, so that a's entry is tried.
			id, _ := launchtest.Start(t, own, "name: staleloop\nactivities:\n  a: {command: [\"true\"]}\n  hold: {command: [sleep, \"120\"]}\n")
			time.Sleep(tc.lag) // the roots are in the lagging index before the first listing
			ss := &staleStore{Store: st}
			if tc.lag == 0 {
				ss.add(id, "a") // READY in every listing, from its run on
			}
			runStale(t, st, ss, launcher.Config{Interval: 10 * time.Second, MaxRunning: 2})
			waitState(t, own, id, "a", state.Completed)
			waitState(t, own, id, "hold", state.Running)
			// The pass that a's exit woke finds the stale entry.
			before := ss.listings.Load()
			time.Sleep(3 * time.Second)
			if n := ss.listings.Load() - before; n > 4 {
				t.Errorf("the launcher listed the READY index %d times in 3 s with an interval of 10 s; want a few at most: a refused claim woke a pass", n)
			}
			if a, err := own.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}); err != nil || a.State != state.Completed || a.Attempt != 1 {
				t.Errorf("a: %v, %v; want COMPLETED at its first attempt, as it was", a, err)
			}
		})
	}
}

// TestInlineStaleReadyEntryKeepsItsSlot: under --max-running 1, an
// activity that runs and is listed READY (an index that lags behind its
// claim) keeps its slot: its stale entry's try does not take the slot
// over and free it when its claim is refused, so the second activity
// starts only once the first has ended.
func TestInlineStaleReadyEntryKeepsItsSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range staleReadyStores(12 * time.Second) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			dir := t.TempDir()
			running, seen := filepath.Join(dir, "running"), filepath.Join(dir, "seen")
			if err := os.Mkdir(running, 0o700); err != nil {
				t.Fatal(err)
			}
			// Each command marks itself running, notes how many are, and
			// stays a while: one that starts beside the other sees 2.
			cmd := `[sh, -c, 'touch ` + running + `/$WHIMBREL_ACTIVITY_EXEC_ID; ls ` + running + ` | wc -l >> ` + seen + `; sleep 6; rm ` + running + `/$WHIMBREL_ACTIVITY_EXEC_ID']`
			id, _ := launchtest.Start(t, own, "name: staleslot\nactivities:\n  a: {command: "+cmd+"}\n  b: {command: "+cmd+"}\n")
			time.Sleep(tc.lag)
			ss := &staleStore{Store: st}
			if tc.lag == 0 {
				ss.add(id, "a", "b") // READY in every listing, running or not
			}
			runStale(t, st, ss, launcher.Config{Interval: 200 * time.Millisecond, MaxRunning: 1})
			runMonitor(t, st)
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			out, err := os.ReadFile(seen)
			if err != nil {
				t.Fatal(err)
			}
			counts := strings.Fields(string(out))
			if len(counts) != 2 {
				t.Fatalf("%d commands ran (%q), want 2", len(counts), out)
			}
			for _, c := range counts {
				if n, _ := strconv.Atoi(c); n > 1 {
					t.Errorf("a command saw %d running at once (%q); want 1 under MaxRunning 1", n, out)
				}
			}
		})
	}
}

// TestInlineRefusedDuplicateKeepsTheLiveRun: a run of an activity listed
// READY while its first run is live (an index that lags) has its claim
// refused, and leaves the live run on the launcher's list of live runs:
// the advance of another activity of the workflow that ends meanwhile
// still knows the workflow is not done, and looks at nothing.
func TestInlineRefusedDuplicateKeepsTheLiveRun(t *testing.T) {
	t.Parallel()
	for _, tc := range staleReadyStores(20 * time.Second) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			id, _ := launchtest.Start(t, own, "name: staledup\nactivities:\n  slow: {command: [sleep, \"12\"]}\n  quick: {command: [sleep, \"3\"]}\n")
			time.Sleep(tc.lag)
			ss := &staleStore{Store: st}
			if tc.lag == 0 {
				ss.add(id, "slow")
			}
			ls := &lookingStore{Store: st}
			runStale(t, ls, ss, launcher.Config{Interval: 300 * time.Millisecond})
			waitState(t, own, id, "quick", state.Completed)
			// quick's advance follows its record closely; slow runs on.
			time.Sleep(time.Second)
			slow, err := own.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "slow"), WorkflowExecID: id})
			if err != nil || slow.State != state.Running {
				t.Fatalf("slow: %v, %v; want RUNNING still (the machine is too slow for this test)", slow, err)
			}
			if n := ls.looks.Load(); n != 0 {
				t.Errorf("with slow live, quick's advance looked %d times whether the workflow was done; want none: a refused duplicate run of slow took it off the live list", n)
			}
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
		})
	}
}
