package simpleapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// maxDecideAttempts bounds how often one event is tried again after
// another participant changed its activity in between.
const maxDecideAttempts = 20

// Delivery is what the stream says of an event's item beyond the item
// itself.
type Delivery struct {
	// Created is when the item was written, by DynamoDB's clock (the
	// stream record's ApproximateCreationDateTime); zero if unknown.
	Created time.Time
	// Rewritten is set when a client wrote a decided item again, wiping
	// its outcome (a MODIFY record): it is decided again, unless the
	// activity shows it already took effect.
	Rewritten bool
}

// ProcessEvent decides ev: it applies it, rejects it, or (when it may
// become legal once an event before it in the state machine's order
// arrives) returns ErrTooEarly so that the record is tried again. It
// returns nil when the event is decided or is none of this processor's
// business, a *MalformedError when it must be skipped, and any other error
// when it should be retried.
func (p *Processor) ProcessEvent(ctx context.Context, ev *state.ActivityEvent, d Delivery) error {
	log := p.log.With("activity_event_id", ev.ActivityEventID, "transition", ev.Transition)
	if ev.Manual {
		// A manual item: the Full Logic API made this change itself.
		log.Debug("a manual event: the Full Logic API applied it")
		return p.recordAlone(ctx, ev, state.Outcome{Result: state.OutcomeIgnored,
			Reason: "manual: the Full Logic API applies it itself", At: state.Truncate(time.Now())})
	}
	if ev.WorkflowName == "" && ev.WorkflowExecID != "" {
		ev.WorkflowName, _, _ = state.SplitID(ev.WorkflowExecID)
	}
	if ev.WorkflowName != "" {
		reg, err := p.registration(ctx, ev.WorkflowName, false)
		if err != nil {
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
		if !p.mine(reg) {
			log.Debug("another function handles this workflow", "lambda", reg.Lambda)
			return nil
		}
	}
	if ev.When.IsZero() {
		// No when: it happened when it was written.
		ev.When = d.Created
		if ev.When.IsZero() {
			ev.When = time.Now()
		}
	}
	for range maxDecideAttempts {
		// Decided already (a record delivered again, or decided as an
		// earlier event of another's)? Strongly consistent.
		cur, err := p.st.GetEvent(ctx, ev.ActivityEventID, ev.ActivityExecID)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil // expired
		case err != nil && !errors.Is(err, state.ErrInvalidItem):
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		case err == nil && cur.Outcome.Processed():
			p.forget(ev.ActivityEventID)
			return p.decidedBefore(ctx, ev)
		}
		a, err := p.locate(ctx, ev)
		switch {
		case errors.Is(err, state.ErrNotFound) && p.young(ev.ActivityEventID):
			return fmt.Errorf("event %s: %w (activity %s is not found yet)", ev.ActivityEventID, ErrTooEarly, ev.ActivityExecID)
		case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return p.rejectAlone(ctx, ev, fmt.Sprintf("activity %s cannot be used: %v", ev.ActivityExecID, err))
		case err != nil:
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
		if ev.WorkflowName == "" {
			// Found by its ID alone: now its workflow says who handles it.
			ev.WorkflowName = a.WorkflowName
			reg, err := p.registration(ctx, ev.WorkflowName, false)
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
			}
			if !p.mine(reg) {
				log.Debug("another function handles this workflow", "lambda", reg.Lambda)
				return nil
			}
		}
		if why := p.checkEvent(ev, a, d.Created); why != "" {
			return p.rejectAlone(ctx, ev, why)
		}
		if d.Rewritten && tookEffect(ev, a) {
			// Written again over its outcome, after it took effect.
			return p.recordAlone(ctx, ev, state.Outcome{Result: state.OutcomeApplied, At: state.Truncate(time.Now()),
				Reason: "it took effect before it was written again"})
		}
		// The undecided events before it in order take effect first, as
		// far as they can now.
		a, err = p.earlier(ctx, ev, a)
		if errors.Is(err, state.ErrConflict) {
			continue // the activity changed meanwhile: read it again
		}
		if err != nil {
			return err
		}
		_, err = p.decide(ctx, ev, a, p.young(ev.ActivityEventID))
		if errors.Is(err, state.ErrConflict) {
			continue
		}
		if err == nil {
			p.forget(ev.ActivityEventID)
		}
		return err
	}
	return fmt.Errorf("event %s: its activity kept changing; trying again later", ev.ActivityEventID)
}

// young reports whether this processor first saw an event less than the
// order window ago: an event it waits for may still be on its way. The
// window runs from the first sight, not from the event's when or the
// record's creation, so that a backlog read late (a poller restarted, a
// clock behind) still gives each event's predecessors their time.
func (p *Processor) young(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	first, ok := p.seen[id]
	if !ok {
		if len(p.seen) > 100000 {
			clear(p.seen)
		}
		first = time.Now()
		p.seen[id] = first
	}
	return time.Since(first) < p.window
}

func (p *Processor) forget(id string) {
	p.mu.Lock()
	delete(p.seen, id)
	p.mu.Unlock()
}

// locate reads ev's activity, finding its workflow when the event names
// only the activity (the base contract's shape): by the activity table's hash key,
// activity_exec_id, alone.
func (p *Processor) locate(ctx context.Context, ev *state.ActivityEvent) (*state.ActivityExec, error) {
	if ev.WorkflowExecID == "" {
		p.mu.Lock()
		ev.WorkflowExecID = p.workflowOf[ev.ActivityExecID]
		p.mu.Unlock()
	}
	if ev.WorkflowExecID != "" {
		return p.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID})
	}
	a, err := p.st.FindActivity(ctx, ev.ActivityExecID)
	if err != nil {
		return nil, err
	}
	ev.WorkflowExecID = a.WorkflowExecID
	p.mu.Lock()
	if len(p.workflowOf) >= 100000 {
		clear(p.workflowOf)
	}
	p.workflowOf[ev.ActivityExecID] = a.WorkflowExecID
	p.mu.Unlock()
	return a, nil
}

// decidedBefore handles an event that has its outcome: a processor that
// applied it may have died before it advanced the workflow; advancing
// again is harmless.
func (p *Processor) decidedBefore(ctx context.Context, ev *state.ActivityEvent) error {
	if ev.WorkflowExecID == "" {
		p.mu.Lock()
		ev.WorkflowExecID = p.workflowOf[ev.ActivityExecID]
		p.mu.Unlock()
	}
	if ev.WorkflowExecID == "" {
		return nil
	}
	a, err := p.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID})
	if err != nil || !a.State.Terminal() {
		return nil
	}
	if _, err := workflow.Advance(ctx, p.st, a, p.log.Named("advance")); err != nil {
		return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	return nil
}

// tookEffect reports whether the activity shows that ev took effect: it
// claimed the activity, or the activity is in the state it asked for and
// names it (the reason an applied event records is "event ID…"), or it
// was the last event decided.
func tookEffect(ev *state.ActivityEvent, a *state.ActivityExec) bool {
	if ev.Transition == string(state.Running) && (a.Owner == ownerFor(ev) || a.Owner == ev.ActivityEventID) {
		return true
	}
	named := strings.HasSuffix(a.EventCursor, "/"+ev.ActivityEventID) || strings.Contains(a.Reason, "event "+ev.ActivityEventID)
	switch ev.Transition {
	case state.TransitionHeartbeat:
		return false // deciding it again does no harm
	case state.TransitionCancel:
		return named && (a.State == state.Cancelled || a.State == state.CancelledRunning)
	}
	return named && string(a.State) == ev.Transition
}

// recordAlone records an outcome on an event without touching its
// activity.
func (p *Processor) recordAlone(ctx context.Context, ev *state.ActivityEvent, o state.Outcome) error {
	err := p.st.RecordEvent(ctx, ev.ActivityEventID, ev.ActivityExecID, o)
	if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("event %s: record its outcome: %w", ev.ActivityEventID, err)
	}
	p.forget(ev.ActivityEventID)
	return nil
}

// rejectAlone records a rejection on an event whose activity is not
// written.
func (p *Processor) rejectAlone(ctx context.Context, ev *state.ActivityEvent, why string) error {
	p.log.Warn("event rejected", "activity_event_id", ev.ActivityEventID, "transition", ev.Transition, "why", why)
	return p.recordAlone(ctx, ev, state.Rejected("%s", why))
}
