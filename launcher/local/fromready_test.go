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

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
)

// movesStore records the state every write of an activity asked for.
type movesStore struct {
	state.Store
	mu    sync.Mutex
	moves []state.ActivityState
}

func (s *movesStore) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	s.mu.Lock()
	s.moves = append(s.moves, c.To)
	s.mu.Unlock()
	return s.Store.UpdateActivity(ctx, k, c)
}

// TestInlineActivityIsClaimedFromReadyInOneWrite: an activity supervised
// inline goes from READY to RUNNING in the inline claim's one conditional
// write, with no launcher's claim to QUEUED before it, and its launch is
// recorded by that claim (launched_as inline:PID), on every store.
func TestInlineActivityIsClaimedFromReadyInOneWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			id, _ := launchtest.Start(t, own, "name: fromready\nactivities:\n  a:\n    command: [\"true\"]\n  b:\n    depends_on: [a]\n    command: [\"true\"]\n")
			ms := &movesStore{Store: st}
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: ms,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(ms, launcher.Config{Interval: 500 * time.Millisecond}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			runMonitor(t, st)
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				if a.State != state.Completed || !strings.HasPrefix(a.LaunchedAs, "inline:") || !a.QueuedTime.IsZero() {
					t.Errorf("%s: %s, launched as %q, queued at %v; want COMPLETED, inline:PID, never queued", a.ActivityName, a.State, a.LaunchedAs, a.QueuedTime)
				}
			}
			ms.mu.Lock()
			defer ms.mu.Unlock()
			for _, to := range ms.moves {
				if to == state.Queued {
					t.Errorf("the launcher wrote an activity QUEUED (writes asked for: %v); an inline activity is claimed from READY", ms.moves)
					break
				}
			}
		})
	}
}

// queuingStore plays another launcher that claims the activity target
// to QUEUED (through own) right after this launcher's pass read its
// workflow, and before the inline claim.
type queuingStore struct {
	state.Store
	own    state.Store
	target state.ActivityKey
	once   sync.Once
}

const otherLauncher = "launcher:another"

func (s *queuingStore) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	wf, err := s.Store.GetWorkflow(ctx, id)
	if err == nil {
		s.once.Do(func() {
			_, _ = s.own.UpdateActivity(context.WithoutCancel(ctx), s.target, state.ActivityChange{
				From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: otherLauncher,
			})
		})
	}
	return wf, err
}

// TestInlineClaimFromReadyLeavesAnotherLaunchersActivity: an activity
// another launcher claimed to QUEUED after this launcher's pass found it
// READY is that launcher's to launch: the inline claim, which moves it
// from READY only, is refused, the command does not start, and the item
// keeps the other launcher's token.
func TestInlineClaimFromReadyLeavesAnotherLaunchersActivity(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			marker := filepath.Join(t.TempDir(), "started")
			id, _ := launchtest.Start(t, own, "name: raced\nactivities:\n  s:\n    command: [\"touch\", "+strconv.Quote(marker)+"]\n")
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			target := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "s"), WorkflowExecID: id}
			l := local.NewLauncher(&queuingStore{Store: st, own: own, target: target}, launcher.Config{Interval: time.Minute}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			logged := waitLogged(t, lb.LogDir, "not starting the command", 45*time.Second)
			if strings.Contains(logged, "[ERROR]") {
				t.Errorf("the log of an activity that never ran has an error in it:\n%s", logged)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command started although another launcher had claimed the activity")
			}
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				if a.State != state.Queued || a.Owner != otherLauncher {
					t.Errorf("%s: %s owned by %q; want QUEUED, still %s's", a.ActivityExecID, a.State, a.Owner, otherLauncher)
				}
			}
		})
	}
}

// TestInlineMaxRunningHoldsWithClaimsFromReady: under --max-running 2,
// six activities supervised inline, each claimed from READY by its inline
// run, never run more than two at once, and all complete.
func TestInlineMaxRunningHoldsWithClaimsFromReady(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			dir := t.TempDir()
			running, seen := filepath.Join(dir, "running"), filepath.Join(dir, "seen")
			if err := os.Mkdir(running, 0o700); err != nil {
				t.Fatal(err)
			}
			// Each command marks itself running, notes how many are, and
			// stays a while: a third one at once would see 3.
			cmd := `[sh, -c, 'touch ` + running + `/$WHIMBREL_ACTIVITY_EXEC_ID; ls ` + running + ` | wc -l >> ` + seen + `; sleep 1; rm ` + running + `/$WHIMBREL_ACTIVITY_EXEC_ID']`
			var b strings.Builder
			b.WriteString("name: capped\nactivities:\n")
			for i := range 6 {
				b.WriteString("  a" + strconv.Itoa(i) + ":\n    command: " + cmd + "\n")
			}
			id, _ := launchtest.Start(t, own, b.String())
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(st, launcher.Config{Interval: 300 * time.Millisecond, MaxRunning: 2}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			runMonitor(t, st)
			wf := launchtest.WaitSettled(t, own, id, 3*time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			out, err := os.ReadFile(seen)
			if err != nil {
				t.Fatal(err)
			}
			counts := strings.Fields(string(out))
			if len(counts) != 6 {
				t.Fatalf("%d commands ran (%q), want 6", len(counts), out)
			}
			for _, c := range counts {
				if n, _ := strconv.Atoi(c); n > 2 {
					t.Errorf("a command saw %d running at once (%q); want at most 2 under MaxRunning 2", n, out)
				}
			}
		})
	}
}

// readsStore counts the launcher's reads of activity items, and lists,
// besides what the READY index lists, the activities in stale, as an
// index that lags behind their claims would.
type readsStore struct {
	state.Store
	reads atomic.Int64
	mu    sync.Mutex
	stale []state.ActivityRef
}

func (s *readsStore) GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	s.reads.Add(1)
	return s.Store.GetActivity(ctx, k)
}

func (s *readsStore) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	refs, err := s.Store.ActivitiesInState(ctx, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.State == state.Ready {
		refs = append(refs, s.stale...)
	}
	return refs, err
}

// TestInlineFirstAttemptsAreClaimedWithoutAReadOfTheirItems: the
// launcher reads no activity item to launch the first attempts of
// activities supervised inline (their claim's conditional write from
// READY is the check), and an activity its listing shows READY after it
// ran (an index that lags) is not run again: its claim is refused.
func TestInlineFirstAttemptsAreClaimedWithoutAReadOfTheirItems(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			ran := filepath.Join(t.TempDir(), "ran")
			cmd := `[sh, -c, 'echo $WHIMBREL_ACTIVITY_NAME >> ` + ran + `']`
			// hold keeps the workflow RUNNING while the stale listings are
			// tried.
			id, _ := launchtest.Start(t, own, "name: unread\nactivities:\n  a: {command: "+cmd+"}\n  b: {command: "+cmd+"}\n  c: {command: "+cmd+", depends_on: [a, b]}\n  hold: {command: [sleep, \"120\"]}\n")
			rs := &readsStore{Store: st}
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(rs, launcher.Config{Interval: 200 * time.Millisecond}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			runMonitor(t, st)
			deadline := time.Now().Add(2 * time.Minute)
			for {
				out, _ := os.ReadFile(ran)
				if len(strings.Fields(string(out))) >= 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a, b and c did not all run within 2 minutes: %q", out)
				}
				time.Sleep(100 * time.Millisecond)
			}
			c, err := own.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "c"), WorkflowExecID: id})
			for err == nil && c.State != state.Completed && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				c, err = own.GetActivity(launchtest.Context(t), c.ActivityKey)
			}
			if err != nil || c.State != state.Completed {
				t.Fatalf("c: %v, %v; want COMPLETED", c, err)
			}
			if n := rs.reads.Load(); n != 0 {
				t.Errorf("the launcher read %d activity items to launch four first attempts; want none", n)
			}
			// From now on its listings also show a, which has run, READY.
			a := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
			rs.mu.Lock()
			rs.stale = append(rs.stale, state.ActivityRef{ActivityKey: a})
			rs.mu.Unlock()
			time.Sleep(2 * time.Second) // several passes
			out, err := os.ReadFile(ran)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Fields(string(out)); len(got) != 3 {
				t.Errorf("commands ran: %q; want a, b and c once each", got)
			}
			if item, err := own.GetActivity(launchtest.Context(t), a); err != nil || item.State != state.Completed {
				t.Errorf("a after stale listings: %v, %v; want COMPLETED as it was", item, err)
			}
		})
	}
}
