package simpleapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// verdict is what an event asks of an activity as it stands.
type verdict int

const (
	apply  verdict = iota // the change is legal now
	reject                // it never will be
	wait                  // it may be once the events before it arrive
)

// decide applies or rejects one event in one conditional write that
// records its outcome and moves the activity's cursor, then advances the
// workflow if the activity ended. An event that may become legal is left
// undecided (ErrTooEarly) while mayWait. A *ConflictError means the
// activity changed meanwhile; an event decided meanwhile returns the
// activity unchanged.
func (p *Processor) decide(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec, mayWait bool) (*state.ActivityExec, error) {
	log := p.log.With("activity_event_id", ev.ActivityEventID, "transition", ev.Transition)
	c, o, v, err := p.changeFor(ctx, ev, a)
	if err != nil {
		return nil, err
	}
	switch {
	case v == wait && mayWait:
		log.Debug("cannot apply yet; an event before it may still arrive", "why", o.Reason)
		return nil, fmt.Errorf("event %s: %w (%s)", ev.ActivityEventID, ErrTooEarly, o.Reason)
	case v == wait:
		o = state.Rejected("%s, and no event that would allow it came within %s", o.Reason, p.window)
		fallthrough
	case v == reject:
		c = &state.ActivityChange{From: []state.ActivityState{a.State}}
	}
	step := inbox.Step{Prev: a.EventCursor, Next: nextCursor(a.EventCursor, ev.ActivityEventID), EventID: ev.ActivityEventID, Outcome: &o}
	key := state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: a.WorkflowExecID}
	next, err := p.st.Decide(ctx, key, *c, step)
	var ce *state.ConflictError
	var nf *state.NotFoundError
	switch {
	case errors.As(err, &ce) && ce.Kind == "activity event", errors.As(err, &nf) && nf.Kind == "activity event":
		log.Debug("the event was decided meanwhile, or is gone", "error", err)
		return a, nil
	case err != nil && !errors.Is(err, state.ErrConflict):
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	case err != nil:
		return nil, err
	}
	p.mu.Lock()
	p.workflowOf[ev.ActivityExecID] = a.WorkflowExecID
	p.mu.Unlock()
	switch {
	case o.Result == state.OutcomeRejected:
		log.Warn("event rejected", "activity_exec_id", ev.ActivityExecID, "why", o.Reason)
	case ev.Transition == state.TransitionHeartbeat:
		log.Debug("heartbeat applied", "activity_exec_id", ev.ActivityExecID)
	default:
		log.Info("event applied", "activity_exec_id", ev.ActivityExecID, "state", next.State)
	}
	if next.State.Terminal() && next.State != a.State {
		if _, err := workflow.Advance(ctx, p.st, next, log.Named("advance")); err != nil {
			// The event took effect; the monitor finishes the advance.
			log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
		}
	}
	return next, nil
}

// nextCursor is the activity's event cursor after deciding one more event:
// a count of the decisions, and the last event decided. It only has to
// grow, so that each decision is conditional on the one before it.
func nextCursor(prev, eventID string) string {
	var n int64
	if len(prev) >= 15 {
		n, _ = strconv.ParseInt(prev[:15], 10, 64)
	}
	return fmt.Sprintf("%015d/%s", n+1, eventID)
}

// changeFor returns the write an event asks for of the activity as it
// stands, with the outcome to record and the verdict; for a rejection or a
// wait, the outcome's reason says why.
func (p *Processor) changeFor(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityChange, state.Outcome, verdict, error) {
	now := time.Now()
	at := ev.When
	if at.After(now) {
		at = now // within the skew allowed, but nothing is recorded as to come
	}
	if ev.Transition == state.TransitionHeartbeat {
		return beatChange(ev, a, at, now)
	}
	return p.moveChange(ctx, ev, a, at, now)
}

// no is changeFor's answer for an event that is not applied now: the
// verdict, and the reason the outcome records.
func no(v verdict, format string, args ...any) (*state.ActivityChange, state.Outcome, verdict, error) {
	return nil, state.Rejected(format, args...), v, nil
}

// beatChange is changeFor for a heartbeat dated at.
func beatChange(ev *state.ActivityEvent, a *state.ActivityExec, at, now time.Time) (*state.ActivityChange, state.Outcome, verdict, error) {
	applied := state.Outcome{Result: state.OutcomeApplied, At: state.Truncate(now)}
	held := fence(ev, a)
	switch {
	case a.State.Terminal():
		return no(reject, "a heartbeat of an activity that is %s, not RUNNING", a.State)
	case a.State != state.Running:
		return no(wait, "a heartbeat of an activity that is %s, not RUNNING yet", a.State)
	case held != "":
		return no(reject, "%s", held)
	case !a.HeartbeatEnabled:
		// heartbeat_time_epoch stays negative while heartbeats are
		// off (docs/contract.md#times).
		return no(reject, "heartbeats are off for this activity (heartbeat_enabled is false): set heartbeat_interval in the workflow definition, or heartbeat_enabled on the RUNNING event")
	}
	// Heartbeats arrive in any order: the newest stands, and so does
	// the newest progress.
	c := &state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: a.Owner, Beat: true, At: at}
	if ev.Progress != "" && len(ev.Progress) <= state.MaxProgress && !at.Before(a.ProgressTime) {
		c.Progress = ev.Progress
	}
	if at.Before(a.HeartbeatTime) {
		c.At = a.HeartbeatTime
		c.Progress = ""
	}
	return c, applied, apply, nil
}

// moveChange is changeFor for an event that asks for a state (or CANCEL),
// dated at.
func (p *Processor) moveChange(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec, at, now time.Time) (*state.ActivityChange, state.Outcome, verdict, error) {
	applied := state.Outcome{Result: state.OutcomeApplied, At: state.Truncate(now)}
	held := fence(ev, a)
	reason := ev.Reason
	if reason == "" {
		reason = "event " + ev.ActivityEventID
		if ev.Source != "" {
			reason += " from " + ev.Source
		}
	}
	to := state.ActivityState(ev.Transition)
	if ev.Transition == state.TransitionCancel {
		to = state.Cancelled
		if a.State == state.Running {
			to = state.CancelledRunning
		}
	}
	var exit *state.Exit
	if ev.ExitCode != nil {
		exit = &state.Exit{Code: *ev.ExitCode, Signal: ev.Signal}
	}
	if (to == state.Completed || to == state.Failed) && ev.Owner != "" && a.Owner == ev.Owner &&
		(a.State == state.CancelledRunning || a.State == state.TimedOut) {
		// The wrapper's outcome after its activity was cancelled or timed
		// out: the state is final; how the command ended goes beside it.
		c := &state.ActivityChange{From: []state.ActivityState{a.State}, Owner: ev.Owner, Exit: exit, Error: ev.Error, Reason: reason, At: at}
		if exit == nil {
			c.Exit = &state.Exit{Code: -1}
		}
		return c, state.Outcome{Result: state.OutcomeRejected, At: state.Truncate(now),
			Reason: fmt.Sprintf("the activity was already %s; how its command ended is recorded beside it", a.State)}, apply, nil
	}
	if err := state.CheckTransition(a.State, to); err != nil {
		if state.Reachable(a.State, to) {
			return no(wait, "%v", err)
		}
		if strings.Contains(err.Error(), "already") {
			return no(reject, "%v", err)
		}
		return no(reject, "the activity is already %s: %v", a.State, err)
	}
	c := &state.ActivityChange{From: []state.ActivityState{a.State}, To: to, Exit: exit, Error: ev.Error, Reason: reason, At: at}
	if ev.Output != "" {
		if to != state.Completed {
			return no(reject, "an output (WHIMBREL_OUTPUT) is recorded only with COMPLETED, not %s", to)
		}
		if err := checkOutput(ev.Output); err != nil {
			return no(reject, "%v", err)
		}
		c.Output = ev.Output
	}
	if ev.Progress != "" && len(ev.Progress) <= state.MaxProgress {
		c.Progress = ev.Progress
	}
	switch {
	case to == state.Running:
		wf, err := p.st.GetWorkflow(ctx, a.WorkflowExecID)
		switch {
		case errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem):
			return no(reject, "its workflow cannot be used: %v", err)
		case err != nil:
			return nil, state.Outcome{}, reject, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		case wf.State == state.WorkflowRequested:
			return no(wait, "workflow %s is still REQUESTED", wf.WorkflowExecID)
		case wf.State != state.WorkflowRunning:
			return no(reject, "workflow %s is %s, not RUNNING", wf.WorkflowExecID, wf.State)
		}
		c.Claim = claim(ev, wf, a, ownerFor(ev))
		// The first heartbeat is the claim itself, as the wrapper's is:
		// the monitor then times the activity out from its start.
		c.Beat = c.Claim.HeartbeatEnabled
	case held != "":
		return no(reject, "%s", held)
	case (to == state.Ready || to == state.Queued) && a.State == state.Requested && len(a.PendingDependencies) > 0:
		return no(reject, "it still waits on %s", strings.Join(a.PendingDependencies, ", "))
	default:
		// Fenced on the owner judged above, so that a claim landing in
		// between wins.
		c.Owner = a.Owner
	}
	return c, applied, apply, nil
}

// claim is what a RUNNING event records: the event's heartbeat settings,
// else those the workflow's definition gives the activity. Heartbeats are
// on when the event or the definition asks for them.
func claim(ev *state.ActivityEvent, wf *state.WorkflowExec, a *state.ActivityExec, owner string) *state.Claim {
	cl := &state.Claim{Owner: owner, Host: ev.Host, PID: ev.PID, HeartbeatEnabled: ev.HeartbeatEnabled,
		HeartbeatInterval: ev.HeartbeatInterval, HeartbeatTimeout: ev.HeartbeatTimeout}
	if def, err := definition.FromJSON(wf.Definition); err == nil && def.Activities[a.ActivityName] != nil {
		s := def.Effective(a.ActivityName)
		if s.HeartbeatInterval > 0 || s.HeartbeatTimeout > 0 {
			cl.HeartbeatEnabled = true
		}
		if cl.HeartbeatInterval == 0 {
			cl.HeartbeatInterval = time.Duration(s.HeartbeatInterval)
		}
		if cl.HeartbeatTimeout == 0 {
			cl.HeartbeatTimeout = time.Duration(s.HeartbeatTimeout)
		}
	}
	if cl.HeartbeatEnabled {
		if cl.HeartbeatInterval == 0 {
			cl.HeartbeatInterval = state.DefaultHeartbeatInterval
		}
		if cl.HeartbeatTimeout == 0 {
			cl.HeartbeatTimeout = state.DefaultHeartbeatTimeout
		}
	}
	return cl
}
