package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestOverlap: a schedule firing every minute whose run never ends on its
// own (no launcher serves it), ticked directly. skip logs the fire time as
// skipped with the reason; queue keeps one fire time waiting and starts it
// once the previous run ended; allow starts both; cancel-previous cancels
// the running one and starts the next.
func TestOverlap(t *testing.T) {
	t0 := ts("2026-11-21T00:00:00Z")
	for _, policy := range []string{schedule.OverlapSkip, schedule.OverlapQueue, schedule.OverlapAllow, schedule.OverlapCancelPrevious} {
		t.Run(policy, func(t *testing.T) {
			onBoth(t, func(t *testing.T, st schedule.Store) {
				ctx := testbin.Context(t)
				if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Cron: "* * * * *",
					Overlap: policy, Start: t0}, t0); err != nil {
					t.Fatal(err)
				}
				if got := get(t, st, "s").Overlap; got != policy {
					t.Fatalf("stored overlap %q, want %q", got, policy)
				}
				first := "s@" + t0.Format(time.RFC3339)
				tick(t, st, t0.Add(10*time.Second))
				same(t, "runs after the first fire", runsOf(t, st, "etl"), []string{first})
				r := tick(t, st, t0.Add(time.Minute+10*time.Second)) // the first still runs
				second := "s@" + t0.Add(time.Minute).Format(time.RFC3339)
				switch policy {
				case schedule.OverlapSkip:
					same(t, "runs", runsOf(t, st, "etl"), []string{first})
					if r.Skipped != 1 || !strings.Contains(get(t, st, "s").Runs[0].Note, "overlap skip") {
						t.Errorf("report %+v, run log %+v: want the skip logged with its reason", r, get(t, st, "s").Runs)
					}
				case schedule.OverlapAllow:
					same(t, "runs", runsOf(t, st, "etl"), []string{first, second})
				case schedule.OverlapCancelPrevious:
					same(t, "runs", runsOf(t, st, "etl"), []string{first, second})
					wf := workflowOf(t, st, first)
					if wf.State != state.WorkflowCancelled || !strings.Contains(wf.Reason, "overlap cancel-previous") {
						t.Errorf("the previous run is %s (%q), want CANCELLED by the schedule", wf.State, wf.Reason)
					}
				case schedule.OverlapQueue:
					same(t, "runs while the first runs", runsOf(t, st, "etl"), []string{first})
					// Another fire time comes: still at most one waits.
					tick(t, st, t0.Add(2*time.Minute+10*time.Second))
					same(t, "runs while the first still runs", runsOf(t, st, "etl"), []string{first})
					if _, err := workflow.Cancel(ctx, st, workflowOf(t, st, first).WorkflowExecID, "test: the previous run ends", nil); err != nil {
						t.Fatal(err)
					}
					tick(t, st, t0.Add(2*time.Minute+20*time.Second))
					same(t, "runs once the first ended", runsOf(t, st, "etl"), []string{first, "s@" + t0.Add(2*time.Minute).Format(time.RFC3339)})
				}
			})
		})
	}
}

// workflowOf reads the execution of a request of workflow etl.
func workflowOf(t *testing.T, st schedule.Store, requestID string) *state.WorkflowExec {
	t.Helper()
	req, err := st.GetRequest(testbin.Context(t), requestID, "etl")
	if err != nil {
		t.Fatal(err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), req.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// TestOverlapStoredBefore: a schedule item written without an overlap
// attribute (by a whimbrel that had none) starts every fire, as it did.
func TestOverlapStoredBefore(t *testing.T) {
	t0 := ts("2026-11-21T00:00:00Z")
	onBoth(t, func(t *testing.T, st schedule.Store) {
		ctx := testbin.Context(t)
		if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Cron: "* * * * *",
			Overlap: schedule.OverlapSkip, Start: t0}, t0); err != nil {
			t.Fatal(err)
		}
		s := get(t, st, "s")
		prev := s.Version
		s.Overlap = "" // the item loses the attribute
		if err := st.PutSchedule(ctx, s, prev, ""); err != nil {
			t.Fatal(err)
		}
		if got := get(t, st, "s").Overlap; got != "" {
			t.Fatalf("overlap %q after writing none", got)
		}
		tick(t, st, t0.Add(10*time.Second))
		tick(t, st, t0.Add(time.Minute+10*time.Second))
		same(t, "runs", runsOf(t, st, "etl"), []string{"s@" + t0.Format(time.RFC3339), "s@" + t0.Add(time.Minute).Format(time.RFC3339)})
	})
}
