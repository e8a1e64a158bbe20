package simpleapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// order is the rank of the state an event asks for, taken from the state
// package's transition table: an activity only ever moves to a deeper
// state (state.Depth). Heartbeats come between RUNNING and the end; every
// end, and CANCEL, ranks last, so that the state machine does not order
// the ends among themselves.
func order(transition string) int {
	running := state.Depth(state.Running)
	s := state.ActivityState(transition)
	switch {
	case transition == state.TransitionHeartbeat:
		return running + 1
	case s.Valid() && !s.Terminal():
		return state.Depth(s)
	}
	return running + 2
}

// before reports whether event a takes effect before event b: by the state
// machine's order, then by when, then by ID.
func before(a, b *state.ActivityEvent) bool {
	if oa, ob := order(a.Transition), order(b.Transition); oa != ob {
		return oa < ob
	}
	if !a.When.Equal(b.When) {
		return a.When.Before(b.When)
	}
	return a.ActivityEventID < b.ActivityEventID
}

// earlier decides the undecided events of ev's activity that come before
// ev and can be decided now; the others are left to their own records. It
// returns the activity as it then stands. The events index is eventually
// consistent and lists only events with when_epoch, so this is an
// improvement on the order, not what keeps it: an event the index misses
// is still decided by its own record.
func (p *Processor) earlier(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityExec, error) {
	// Only the recent ones: an older undecided event is its own record's
	// to decide, and an activity that heartbeats for hours has thousands.
	all, err := p.st.Events(ctx, ev.ActivityExecID, ev.When.Add(-p.window-earlierSpan))
	// An event that cannot be decoded is reported by the store and left
	// out: the processor judges it from its own stream record.
	if _, err = state.Skipped(err); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	var queue []*state.ActivityEvent
	for _, e := range all {
		if e.ActivityEventID == ev.ActivityEventID || e.Outcome.Processed() || e.Manual || p.foreign(e, a) || !before(e, ev) {
			continue
		}
		e.WorkflowExecID, e.WorkflowName = a.WorkflowExecID, a.WorkflowName
		queue = append(queue, e)
	}
	sort.Slice(queue, func(i, j int) bool { return before(queue[i], queue[j]) })
	for _, e := range queue {
		next, err := p.decide(ctx, e, a, true)
		switch {
		case errors.Is(err, ErrTooEarly):
			continue // its own record decides it
		case err != nil:
			return nil, err
		}
		a = next
	}
	return a, nil
}

// earlierSpan is how far before an event's when earlier looks, beyond the
// order window.
const earlierSpan = time.Minute
