package state

import "fmt"

// ActivityState is the state of one activity execution. The ten values and
// the moves between them are the client contract
// (docs/contract.md#activity-states); every
// participant obeys them, which is what lets Whimbrel run without a server.
type ActivityState string

// The activity states of the contract.
const (
	// Requested is the state of an activity on its first insert.
	Requested ActivityState = "REQUESTED"
	// Ready means every activity it waits on has completed.
	Ready ActivityState = "READY"
	// Queued means a launcher has submitted it for execution, so no other
	// launcher may do the same.
	Queued ActivityState = "QUEUED"
	// Preparing means its environment is being set up.
	Preparing ActivityState = "PREPARING"
	// Running means the wrapper has claimed it and runs its command; it must
	// now heartbeat (if heartbeats are enabled) or be judged broken.
	Running ActivityState = "RUNNING"
	// Cancelled means it was cancelled while not running, or because an
	// activity it waits on did not complete.
	Cancelled ActivityState = "CANCELLED"
	// CancelledRunning means it was cancelled while running; its wrapper
	// stops the command when it sees this state.
	CancelledRunning ActivityState = "CANCELLED_RUNNING"
	// TimedOut means its heartbeat stopped. The command may still be running;
	// its wrapper may record other attributes but never change the state.
	TimedOut ActivityState = "TIMED_OUT"
	// Failed means it ended with an error, so its dependents cannot run.
	Failed ActivityState = "FAILED"
	// Completed means it ended without an error.
	Completed ActivityState = "COMPLETED"
)

// ActivityStates lists every activity state, in the order of the contract.
var ActivityStates = []ActivityState{
	Requested, Ready, Queued, Preparing, Running,
	Cancelled, CancelledRunning, TimedOut, Failed, Completed,
}

// activityTransitions is the contract's transition list
// (docs/contract.md#transitions), keyed by the current state. The base
// contract names a transition by its verb (CANCEL, READY, …); here each
// verb is written as the state it leads to, so CANCEL appears as
// CANCELLED, or as CANCELLED_RUNNING from RUNNING.
//
// RUNNING → TIMED_OUT is not in the base contract's transition list but is
// the one write its heartbeat monitor makes ("set the state to TIMED_OUT"
// where state == RUNNING), so it is legal here too; TIMED_OUT is reachable
// no other way.
var activityTransitions = map[ActivityState][]ActivityState{
	Requested: {Cancelled, Ready, Queued},
	Ready:     {Cancelled, Queued, Preparing, Running},
	Queued:    {Cancelled, Preparing, Running, Failed},
	Preparing: {Cancelled, Running, Failed},
	Running:   {CancelledRunning, Failed, Completed, TimedOut},
	// CANCELLED_RUNNING, CANCELLED, TIMED_OUT, FAILED and COMPLETED are
	// terminal: no transitions.
}

// Valid reports whether s is one of the ten activity states.
func (s ActivityState) Valid() bool {
	for _, v := range ActivityStates {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no transition leaves s.
func (s ActivityState) Terminal() bool {
	return s.Valid() && len(activityTransitions[s]) == 0
}

// EndedBadly reports whether an activity in s ended in error: FAILED (its
// command failed, or it could not be started) or TIMED_OUT (its heartbeat
// stopped). These are the outcomes a retry policy retries, the ones whose
// reason and stderr the views show, and the ones painted red. A
// cancellation, CANCELLED or CANCELLED_RUNNING, is not: it is someone's
// decision, not the activity's failure.
func (s ActivityState) EndedBadly() bool {
	return s == Failed || s == TimedOut
}

// NotStarted reports whether an activity in s is still waiting its turn:
// REQUESTED, READY or QUEUED. No launcher has begun to prepare it and no
// wrapper has claimed it, so its command has not started.
func (s ActivityState) NotStarted() bool {
	return s == Requested || s == Ready || s == Queued
}

// Next lists the states s may move to, in the contract's order.
func (s ActivityState) Next() []ActivityState {
	return append([]ActivityState(nil), activityTransitions[s]...)
}

// CheckTransition returns nil if the contract allows an activity in state
// from to move to state to, and a *TransitionError otherwise.
func CheckTransition(from, to ActivityState) error {
	for _, next := range activityTransitions[from] {
		if next == to {
			return nil
		}
	}
	return &TransitionError{Kind: "activity", From: string(from), To: string(to), Allowed: statesString(activityTransitions[from])}
}

// Reachable reports whether legal transitions lead an activity from state
// from to state to in one move or more. No state is reachable from itself:
// the transitions never loop.
func Reachable(from, to ActivityState) bool {
	seen := map[ActivityState]bool{}
	next := append([]ActivityState(nil), activityTransitions[from]...)
	for len(next) > 0 {
		s := next[0]
		next = next[1:]
		if s == to {
			return true
		}
		if !seen[s] {
			seen[s] = true
			next = append(next, activityTransitions[s]...)
		}
	}
	return false
}

// Depth is the number of moves on the longest legal path from REQUESTED to
// s (REQUESTED is 0, RUNNING 4): every legal move leads to a deeper state,
// so ordering by depth orders states as an activity passes through them.
// It is -1 for a state that is not one of the ten.
func Depth(s ActivityState) int {
	if !s.Valid() {
		return -1
	}
	depth := 0
	for from, tos := range activityTransitions {
		for _, to := range tos {
			if to == s {
				depth = max(depth, Depth(from)+1)
			}
		}
	}
	return depth
}

// WorkflowState is the state of one workflow execution.
type WorkflowState string

// The workflow states: REQUESTED → RUNNING → COMPLETED | FAILED | CANCELLED.
const (
	// WorkflowRequested is the state while its items are being written.
	WorkflowRequested WorkflowState = "REQUESTED"
	// WorkflowRunning means its activities may be launched.
	WorkflowRunning WorkflowState = "RUNNING"
	// WorkflowCompleted means every activity completed.
	WorkflowCompleted WorkflowState = "COMPLETED"
	// WorkflowFailed means every activity is terminal and one did not complete.
	WorkflowFailed WorkflowState = "FAILED"
	// WorkflowCancelled means an operator cancelled it.
	WorkflowCancelled WorkflowState = "CANCELLED"
)

// WorkflowStates lists every workflow state.
var WorkflowStates = []WorkflowState{
	WorkflowRequested, WorkflowRunning, WorkflowCompleted, WorkflowFailed, WorkflowCancelled,
}

var workflowTransitions = map[WorkflowState][]WorkflowState{
	// A workflow may be cancelled or fail before it ever runs, for example
	// when its creator died half-way and the monitor gives up on it.
	WorkflowRequested: {WorkflowRunning, WorkflowFailed, WorkflowCancelled},
	WorkflowRunning:   {WorkflowCompleted, WorkflowFailed, WorkflowCancelled},
}

// Valid reports whether s is one of the workflow states.
func (s WorkflowState) Valid() bool {
	for _, v := range WorkflowStates {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether the workflow is settled.
func (s WorkflowState) Terminal() bool {
	return s.Valid() && len(workflowTransitions[s]) == 0
}

// CheckWorkflowTransition returns nil if a workflow in state from may move
// to state to, and a *TransitionError otherwise.
func CheckWorkflowTransition(from, to WorkflowState) error {
	for _, next := range workflowTransitions[from] {
		if next == to {
			return nil
		}
	}
	var allowed []string
	for _, s := range workflowTransitions[from] {
		allowed = append(allowed, string(s))
	}
	return &TransitionError{Kind: "workflow", From: string(from), To: string(to), Allowed: joinOr(allowed)}
}

func statesString(states []ActivityState) string {
	var names []string
	for _, s := range states {
		names = append(names, string(s))
	}
	return joinOr(names)
}

func joinOr(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	out := ""
	for i, n := range names {
		switch {
		case i == 0:
			out = n
		case i == len(names)-1:
			out += " or " + n
		default:
			out += ", " + n
		}
	}
	return out
}

// String makes the state print as its contract name.
func (s ActivityState) String() string { return string(s) }

// String makes the state print as its contract name.
func (s WorkflowState) String() string { return string(s) }

var _ fmt.Stringer = Requested
