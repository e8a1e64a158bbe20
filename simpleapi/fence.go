package simpleapi

import (
	"fmt"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// DefaultMaxAge is how far an event's when may lie before the time its
// item was written (by DynamoDB's clock when the stream says it, else the
// processor's): a wrapper writes its events as they happen and retries an
// unlucky write for minutes, not hours, so an event dated earlier is a
// forgery or a broken clock, and applying it would record an end or a
// heartbeat at a time that never was.
const DefaultMaxAge = time.Hour

// eventOwnerPrefix marks the owner a RUNNING event without an owner claims
// its activity under: the event's own ID follows it. Such an activity is
// held by nobody in particular, so the events of the client that claimed
// it, which name no owner either (a client of the base contract), still
// move it.
const eventOwnerPrefix = "event:"

// ownerFor is the owner a RUNNING event claims its activity for.
func ownerFor(ev *state.ActivityEvent) string {
	if ev.Owner != "" {
		return ev.Owner
	}
	return eventOwnerPrefix + ev.ActivityEventID
}

// heldByName reports whether a RUNNING activity is held by an owner that
// named itself: a wrapper's claim (through the Full Logic API, or a RUNNING
// event with an owner). An activity claimed by an event without an owner
// (under eventOwnerPrefix, or under the bare event ID, which is the shape
// `(activity_exec_id)::(uuid)`) is held by nobody in particular.
func heldByName(a *state.ActivityExec) bool {
	return a.State == state.Running && a.Owner != "" &&
		!strings.HasPrefix(a.Owner, eventOwnerPrefix) && !strings.HasPrefix(a.Owner, a.ActivityExecID+"::")
}

// fence says why ev, a heartbeat or a move other than the claim, may not
// touch a as it stands ("" when it may): an event that names an owner
// speaks only for that owner, and an activity a named owner holds hears
// only that owner. Otherwise any client that can insert an event could
// complete, fail, time out or cancel the activity a wrapper is running, or
// keep it alive with heartbeats, behind the wrapper's back.
func fence(ev *state.ActivityEvent, a *state.ActivityExec) string {
	what := "sent"
	if ev.Transition == state.TransitionHeartbeat {
		what = "a heartbeat"
	}
	switch {
	case ev.Owner != "" && ev.Owner != a.Owner:
		return fmt.Sprintf("%s by owner %s, but %s holds the activity", what, ev.Owner, ownerOrNone(a.Owner))
	case ev.Owner == "" && heldByName(a):
		return what + " without an owner, but the wrapper that claimed the activity holds it: only the holder's heartbeats and outcomes are accepted (to stop the activity, cancel its workflow with whimbrel cancel)"
	}
	return ""
}

// checkEvent says why an event must be rejected whatever its activity's
// state ("" when nothing is wrong with it): a when out of bounds, or a
// workflow_name that is not its activity's (created is when the item was
// written, zero if unknown; a may be nil before the activity is read).
func (p *Processor) checkEvent(ev *state.ActivityEvent, a *state.ActivityExec, created time.Time) string {
	now := time.Now()
	written := created
	if written.IsZero() {
		written = now
	}
	switch {
	case ev.When.After(now.Add(p.skew)):
		return fmt.Sprintf("its when (%s) is %s ahead of the processor's clock, more than the %s allowed: write when in UTC from a synchronised clock",
			ev.When.UTC().Format(time.RFC3339), ev.When.Sub(now).Round(time.Second), p.skew)
	case !ev.When.IsZero() && ev.When.Before(written.Add(-p.maxAge)):
		return fmt.Sprintf("its when (%s) is %s before the event was written, more than the %s allowed: write when as the time of the change, in UTC from a synchronised clock",
			ev.When.UTC().Format(time.RFC3339), written.Sub(ev.When).Round(time.Second), p.maxAge)
	case a != nil && ev.WorkflowName != "" && ev.WorkflowName != a.WorkflowName:
		return fmt.Sprintf("its workflow_name is %q, but activity %s belongs to workflow %q: an event moves only an activity of the workflow it names",
			ev.WorkflowName, a.ActivityExecID, a.WorkflowName)
	}
	return ""
}

// foreign reports whether an event found beside ev (by the events index)
// is left to its own record rather than decided ahead of ev: one of
// another workflow, or one its own record will reject for its when.
func (p *Processor) foreign(e *state.ActivityEvent, a *state.ActivityExec) bool {
	return e.When.IsZero() || (e.WorkflowExecID != "" && e.WorkflowExecID != a.WorkflowExecID) ||
		p.checkEvent(e, a, time.Time{}) != ""
}

// orDefault is d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// ownerOrNone names an owner in a reason, or says there is none.
func ownerOrNone(o string) string {
	if o == "" {
		return "no owner"
	}
	return o
}
