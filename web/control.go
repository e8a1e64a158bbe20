package web

import "github.com/whimbrel/whimbrel/inspect"

// skippedLook shows a skipped activity: it ended without running, which
// is neither a completion nor a cancellation.
var skippedLook = look{"skipped", "↷"}

// controlRow sets how a row shows an activity's control flow: a skipped
// one in its own look, one cancelled by its trigger rule labelled so, a
// finally activity marked (docs/control-flow.md).
func controlRow(r *activityRow) {
	r.Label = string(r.State)
	switch r.Shown {
	case inspect.ShownSkipped:
		r.look, r.Label = skippedLook, inspect.ShownSkipped
		r.ShowReason = r.Reason != ""
	case inspect.ShownRuleCancelled:
		r.Label = inspect.ShownRuleCancelled
	}
	if r.Finally {
		r.Label += " (finally)"
	}
}
