package local

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
	"github.com/whimbrel/whimbrel/wrapper"
)

// handingReporter is the reporter of an activity supervised inline: it
// reports straight to the launcher's store, as wrapper.Direct does, and
// hands the activities its advance readied to the launcher's next pass
// (launcher.Launcher.Handoff), which tries them at once instead of
// listing the READY index to find them.
type handingReporter struct {
	wrapper.Reporter
	st   state.Store
	hand func([]state.ActivityKey)
	wake func() // a pass that lists (launcher.Launcher.Wake)
	live *liveRuns
}

// reporter is the Reporter of the activities b supervises inline.
func (b *Backend) reporter() wrapper.Reporter {
	direct := wrapper.Direct(b.Store)
	if b.handoff == nil {
		return direct
	}
	return handingReporter{Reporter: direct, st: b.Store, hand: b.handoff, wake: b.wakeList, live: &b.live}
}

func (h handingReporter) Recorded(ctx context.Context, a *state.ActivityExec, wf *state.WorkflowExec, log hclog.Logger) (bool, error) {
	// This run advances now: it leaves the live runs, and its settle
	// need not look while another run of the workflow is live (live.go).
	h.live.leave(a.ActivityKey)
	ctx = workflow.WithKnownLive(ctx, h.live.live)
	res, err := workflow.AdvanceKnown(ctx, h.st, wf, a, log)
	if len(res.Readied) > 0 {
		keys := make([]state.ActivityKey, len(res.Readied))
		for i, id := range res.Readied {
			keys[i] = state.ActivityKey{ActivityExecID: id, WorkflowExecID: a.WorkflowExecID}
		}
		h.hand(keys)
	}
	if res.ReadiedMaps && h.wake != nil {
		// A map readies its elements a page at a time and Readied names
		// only the map or a page's first element: a pass that lists the
		// READY index finds the rest at once.
		h.wake()
	}
	return len(res.Readied) > 0, err
}

// WorkflowState reads the workflow's state alone, as the claim of an
// activity supervised inline does before its write (wrapper.Direct's).
func (h handingReporter) WorkflowState(ctx context.Context, id string) (state.WorkflowState, error) {
	if ws, ok := h.Reporter.(interface {
		WorkflowState(ctx context.Context, id string) (state.WorkflowState, error)
	}); ok {
		return ws.WorkflowState(ctx, id)
	}
	wf, err := h.Reporter.GetWorkflow(ctx, id)
	if err != nil {
		return "", err
	}
	return wf.State, nil
}

// ClaimRecordsLaunch reports whether j's launch is recorded by its
// wrapper's claim: it is for an activity supervised inline, whose launch
// (inline:PID) is known before the claim (wrapper.Config.LaunchedAs).
func (b *Backend) ClaimRecordsLaunch(j launcher.Job) bool { return b.inline(j) }

// ClaimsFromReady reports whether j's supervisor claims it from READY
// itself, with no claim of the launcher's before (launcher.ReadyClaimer):
// it does for an activity supervised inline, which starts at once.
func (b *Backend) ClaimsFromReady(j launcher.Job) bool { return b.inline(j) }
