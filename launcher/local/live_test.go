package local_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
)

// lookingStore counts the reads a settle makes to find out whether a
// workflow is done: a probe of a few items, a query for any live one, a
// listing of them all. It passes on the stores' cheaper reads as they are.
type lookingStore struct {
	state.Store
	looks atomic.Int64
}

func (s *lookingStore) AnyLiveOf(ctx context.Context, keys []state.ActivityKey) (bool, error) {
	s.looks.Add(1)
	if p, ok := s.Store.(interface {
		AnyLiveOf(context.Context, []state.ActivityKey) (bool, error)
	}); ok {
		return p.AnyLiveOf(ctx, keys)
	}
	return false, nil // cannot tell: the settle goes on to list
}

func (s *lookingStore) AnyLive(ctx context.Context, id string) (bool, error) {
	s.looks.Add(1)
	if f, ok := s.Store.(interface {
		AnyLive(context.Context, string) (bool, error)
	}); ok {
		return f.AnyLive(ctx, id)
	}
	return false, nil // cannot tell: the settle goes on to list
}

func (s *lookingStore) Activities(ctx context.Context, id string) ([]*state.ActivityExec, error) {
	s.looks.Add(1)
	return s.Store.Activities(ctx, id)
}

func (s *lookingStore) WorkflowState(ctx context.Context, id string) (state.WorkflowState, error) {
	if ws, ok := s.Store.(interface {
		WorkflowState(context.Context, string) (state.WorkflowState, error)
	}); ok {
		return ws.WorkflowState(ctx, id)
	}
	wf, err := s.Store.GetWorkflow(ctx, id)
	if err != nil {
		return "", err
	}
	return wf.State, nil
}

// TestInlineAdvanceDoesNotLookWhileAnotherRunIsLive: of eight activities
// supervised inline at once, only the advance of the last to end looks
// whether the workflow is done (and settles it): the others know that a
// run of the same workflow in the same launcher is still live, and will
// look once it ends.
func TestInlineAdvanceDoesNotLookWhileAnotherRunIsLive(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			// Each command waits until all eight have started, so that every
			// run is live before the first ends, however loaded the machine;
			// then the last of them ends seconds after the other seven, whose
			// advances all see it live.
			started := t.TempDir()
			var b strings.Builder
			b.WriteString("name: eight\nactivities:\n")
			for i := range 8 {
				after := "0"
				if i == 7 {
					after = "5"
				}
				script := "touch " + started + "/a" + strconv.Itoa(i) + "; while [ $(ls " + started + " | wc -l) -lt 8 ]; do sleep 0.05; done; sleep " + after
				b.WriteString("  a" + strconv.Itoa(i) + ":\n    command: [sh, -c, " + strconv.Quote(script) + "]\n")
			}
			id, _ := launchtest.Start(t, own, b.String())
			ls := &lookingStore{Store: st}
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: ls,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(st, launcher.Config{Interval: 500 * time.Millisecond}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			// The last advance probes, finds none live, and lists: 3 at most.
			if n := ls.looks.Load(); n > 4 {
				t.Errorf("the advances of 8 activities run at once looked %d times whether the workflow was done; want at most 4 (the last one's)", n)
			}
		})
	}
}

// TestInlineRunEndedWithoutItsAdvanceSettles: a run whose activity was
// ended by someone who did not advance the workflow (a participant that
// died between its write and its advance), and whose own outcome is then
// refused, so that it advances nothing, settles the workflow when it
// ends if another run's advance skipped its settle because that run was
// live; the monitor is not needed.
func TestInlineRunEndedWithoutItsAdvanceSettles(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			id, _ := launchtest.Start(t, own, `name: endedelsewhere
defaults: {heartbeat_interval: 1s, heartbeat_timeout: 30s}
activities:
  quick: {command: ["true"]}
  slow: {command: [sleep, "60"]}
  b: {command: ["true"]}
  c: {command: ["true"]}
  d: {command: ["true"]}
`)
			runInline(t, st)
			// Once quick and its siblings are done and slow runs, slow is
			// recorded COMPLETED behind its run's back, with no advance:
			// its run, whose command is then stopped, finds its outcome
			// (FAILED, by the stop) refused and advances nothing.
			deadline := time.Now().Add(time.Minute)
			var slow *state.ActivityExec
			for slow == nil {
				if time.Now().After(deadline) {
					t.Fatal("the activities did not reach COMPLETED and RUNNING within a minute")
				}
				acts, err := own.Activities(launchtest.Context(t), id)
				if err != nil {
					t.Fatal(err)
				}
				done, running := 0, (*state.ActivityExec)(nil)
				for _, a := range acts {
					switch {
					case a.State == state.Completed:
						done++
					case a.ActivityName == "slow" && a.State == state.Running:
						running = a
					}
				}
				if done == 4 && running != nil {
					slow = running
				}
				time.Sleep(100 * time.Millisecond)
			}
			if _, err := own.UpdateActivity(launchtest.Context(t), slow.ActivityKey, state.ActivityChange{
				From: []state.ActivityState{state.Running}, To: state.Completed, Owner: slow.Owner, Reason: "recorded by a participant that died before its advance",
			}); err != nil {
				t.Fatal(err)
			}
			wf := launchtest.WaitSettled(t, own, id, time.Minute)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s (%s); want COMPLETED, settled by the run of slow as it ended", wf.State, wf.Reason)
			}
		})
	}
}
