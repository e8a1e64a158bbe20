package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
)

// cancellingStore cancels the workflow (its state alone, the first write
// of a cancel) through own right after the launcher's pass read it
// RUNNING, and again after a launcher's claim of an activity to QUEUED
// lands: either way before the inline wrapper's claim.
type cancellingStore struct {
	state.Store
	own state.Store
}

func (s *cancellingStore) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	wf, err := s.Store.GetWorkflow(ctx, id)
	if err == nil && wf.State == state.WorkflowRunning {
		s.cancel(ctx, id)
	}
	return wf, err
}

func (s *cancellingStore) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	a, err := s.Store.UpdateActivity(ctx, k, c)
	if c.To == state.Queued {
		// Whether or not its answer was lost (the fault proxy), the claim
		// may have landed: the workflow is cancelled either way.
		s.cancel(ctx, k.WorkflowExecID)
	}
	return a, err
}

// cancel cancels the workflow id; a second cancel conflicts, harmlessly.
func (s *cancellingStore) cancel(ctx context.Context, id string) {
	_, _ = s.own.UpdateWorkflow(context.WithoutCancel(ctx), id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: "cancelled between the pass and the claim",
	})
}

// TestInlineClaimRefusesAWorkflowCancelledAfterThePass: a workflow
// cancelled after the launcher's pass read it RUNNING, and before the
// claim of the activity it launched inline, does not have the command
// started: the claim reads the workflow's state again.
func TestInlineClaimRefusesAWorkflowCancelledAfterThePass(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			marker := filepath.Join(t.TempDir(), "started")
			id, _ := launchtest.Start(t, own, "name: cancelclaim\nactivities:\n  s:\n    command: [\"touch\", "+strconv.Quote(marker)+"]\n")
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(&cancellingStore{Store: st, own: own}, launcher.Config{Interval: time.Minute}, lb, nil)
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
				t.Error("the command started although its workflow was CANCELLED before the claim")
			}
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				if a.State == state.Running || a.State == state.Completed {
					t.Errorf("%s: %s; want it never claimed", a.ActivityExecID, a.State)
				}
			}
		})
	}
}

// waitLogged waits up to within for a log in dir to hold what, and
// returns that log.
func waitLogged(t *testing.T, dir, what string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range logs {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), what) {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log in %s holds %q within %v", dir, what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
