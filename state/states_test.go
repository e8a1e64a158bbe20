package state_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

// legal is the contract's transition list, written out independently of the
// implementation (with the heartbeat monitor's RUNNING → TIMED_OUT).
var legal = map[[2]state.ActivityState]bool{
	{state.Requested, state.Cancelled}: true,
	{state.Requested, state.Ready}:     true,
	{state.Requested, state.Queued}:    true,

	{state.Ready, state.Cancelled}: true,
	{state.Ready, state.Queued}:    true,
	{state.Ready, state.Preparing}: true,
	{state.Ready, state.Running}:   true,

	{state.Queued, state.Cancelled}: true,
	{state.Queued, state.Preparing}: true,
	{state.Queued, state.Running}:   true,
	{state.Queued, state.Failed}:    true,

	{state.Preparing, state.Cancelled}: true,
	{state.Preparing, state.Running}:   true,
	{state.Preparing, state.Failed}:    true,

	{state.Running, state.CancelledRunning}: true,
	{state.Running, state.Failed}:           true,
	{state.Running, state.Completed}:        true,
	{state.Running, state.TimedOut}:         true,
}

func TestAllTransitionPairs(t *testing.T) {
	if len(state.ActivityStates) != 10 {
		t.Fatalf("%d activity states, want the contract's 10", len(state.ActivityStates))
	}
	pairs := 0
	for _, from := range state.ActivityStates {
		for _, to := range state.ActivityStates {
			pairs++
			err := state.CheckTransition(from, to)
			if legal[[2]state.ActivityState{from, to}] {
				if err != nil {
					t.Errorf("%s → %s is legal, got %v", from, to, err)
				}
				continue
			}
			var te *state.TransitionError
			if !errors.As(err, &te) {
				t.Errorf("%s → %s: got %v, want a *TransitionError", from, to, err)
				continue
			}
			if te.From != string(from) || te.To != string(to) ||
				!strings.Contains(err.Error(), string(from)) || !strings.Contains(err.Error(), string(to)) {
				t.Errorf("%s → %s: error %q must name the current and the requested state", from, to, err)
			}
		}
	}
	if pairs != 100 {
		t.Errorf("checked %d pairs, want 100", pairs)
	}
}

func TestTerminalStates(t *testing.T) {
	want := map[state.ActivityState]bool{
		state.Cancelled: true, state.CancelledRunning: true, state.TimedOut: true,
		state.Failed: true, state.Completed: true,
	}
	for _, s := range state.ActivityStates {
		if got := s.Terminal(); got != want[s] {
			t.Errorf("%s.Terminal() = %v, want %v", s, got, want[s])
		}
	}
	if state.ActivityState("SLEEPING").Valid() || state.ActivityState("SLEEPING").Terminal() {
		t.Error("an unknown state must be neither valid nor terminal")
	}
}

// TestStatePredicates: each question about a state has one answer, for
// every state of the list.
func TestStatePredicates(t *testing.T) {
	endedBadly := map[state.ActivityState]bool{state.Failed: true, state.TimedOut: true}
	notStarted := map[state.ActivityState]bool{state.Requested: true, state.Ready: true, state.Queued: true}
	for _, s := range state.ActivityStates {
		if got := s.EndedBadly(); got != endedBadly[s] {
			t.Errorf("%s.EndedBadly() = %v, want %v", s, got, endedBadly[s])
		}
		if got := s.NotStarted(); got != notStarted[s] {
			t.Errorf("%s.NotStarted() = %v, want %v", s, got, notStarted[s])
		}
		if s.EndedBadly() && !s.Terminal() {
			t.Errorf("%s ended badly but is not terminal", s)
		}
		if s.NotStarted() && s.Terminal() {
			t.Errorf("%s has not started but is terminal", s)
		}
	}
	if state.ActivityState("failed").EndedBadly() || state.ActivityState("").NotStarted() {
		t.Error("a state that is not the contract's answers yes")
	}
}

func TestTransitionErrorMessages(t *testing.T) {
	tests := []struct {
		from, to state.ActivityState
		want     string
	}{
		{state.Completed, state.Running, "activity state COMPLETED is terminal: it cannot move to RUNNING"},
		{state.Requested, state.Running, "activity in state REQUESTED cannot move to RUNNING (only to CANCELLED, READY or QUEUED)"},
		{state.Ready, state.Ready, "activity is already READY"},
		{"SLEEPING", state.Ready, `activity state "SLEEPING" is unknown: it cannot move to READY`},
	}
	for _, tc := range tests {
		if got := state.CheckTransition(tc.from, tc.to).Error(); got != tc.want {
			t.Errorf("CheckTransition(%s, %s):\n got %q\nwant %q", tc.from, tc.to, got, tc.want)
		}
	}
}

func TestWorkflowTransitions(t *testing.T) {
	legal := map[[2]state.WorkflowState]bool{
		{state.WorkflowRequested, state.WorkflowRunning}:   true,
		{state.WorkflowRequested, state.WorkflowFailed}:    true,
		{state.WorkflowRequested, state.WorkflowCancelled}: true,
		{state.WorkflowRunning, state.WorkflowCompleted}:   true,
		{state.WorkflowRunning, state.WorkflowFailed}:      true,
		{state.WorkflowRunning, state.WorkflowCancelled}:   true,
	}
	for _, from := range state.WorkflowStates {
		for _, to := range state.WorkflowStates {
			err := state.CheckWorkflowTransition(from, to)
			if got := err == nil; got != legal[[2]state.WorkflowState{from, to}] {
				t.Errorf("workflow %s → %s: allowed=%v, want %v (%v)", from, to, got, !got, err)
			}
		}
	}
}

// TestReachable walks every pair of states and compares Reachable with the
// transitive closure of the independently written transition list.
func TestReachable(t *testing.T) {
	closure := map[[2]state.ActivityState]bool{}
	for k := range legal {
		closure[k] = true
	}
	for _, via := range state.ActivityStates {
		for _, from := range state.ActivityStates {
			for _, to := range state.ActivityStates {
				if closure[[2]state.ActivityState{from, via}] && closure[[2]state.ActivityState{via, to}] {
					closure[[2]state.ActivityState{from, to}] = true
				}
			}
		}
	}
	for _, from := range state.ActivityStates {
		for _, to := range state.ActivityStates {
			if got, want := state.Reachable(from, to), closure[[2]state.ActivityState{from, to}]; got != want {
				t.Errorf("Reachable(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if state.Reachable(state.Requested, "BOGUS") || state.Reachable("BOGUS", state.Ready) {
		t.Error("a state that is not one of the ten is reachable")
	}
}

// TestDepth checks that every legal move leads to a deeper state and that
// the states an activity passes through before its end are ranked in the
// contract's order.
func TestDepth(t *testing.T) {
	for k := range legal {
		if state.Depth(k[1]) <= state.Depth(k[0]) {
			t.Errorf("Depth(%s) = %d is not beyond Depth(%s) = %d", k[1], state.Depth(k[1]), k[0], state.Depth(k[0]))
		}
	}
	for want, s := range []state.ActivityState{state.Requested, state.Ready, state.Queued, state.Preparing, state.Running} {
		if got := state.Depth(s); got != want {
			t.Errorf("Depth(%s) = %d, want %d", s, got, want)
		}
	}
	if got := state.Depth("BOGUS"); got != -1 {
		t.Errorf("Depth(BOGUS) = %d, want -1", got)
	}
}
