package monitor

import (
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// Observer is told, by the goroutine that swept, what each sweep saw live
// and what it did, once the sweep has ended. Metrics use it: the sweep
// already reads every live activity and workflow, so what is live costs
// no read of its own.
type Observer interface {
	Swept(Seen)
}

// Seen is what one sweep saw. The counts are by workflow name, never by
// execution: a name is what a dashboard groups by. A state whose listing
// failed is missing from ActivityStates or WorkflowStates, and its counts
// are then unknown rather than zero.
type Seen struct {
	Report Report
	Took   time.Duration
	Err    error

	// ActivityStates and WorkflowStates are the live states listed in
	// full; Activities and Workflows count what they held.
	ActivityStates []state.ActivityState
	WorkflowStates []state.WorkflowState
	Activities     map[NameState]int
	Workflows      map[NameState]int
	// OldestReady is, by workflow name, how long its oldest READY
	// activity has been READY.
	OldestReady map[string]time.Duration
	// OldestHeartbeat is, by workflow name, the age of the oldest last
	// heartbeat among its RUNNING activities with heartbeats on (judged
	// from the start or the claim where none landed yet).
	OldestHeartbeat map[string]time.Duration
}

// NameState is a workflow name and a state.
type NameState struct {
	Workflow string
	State    string
}

func newSeen() Seen {
	return Seen{Activities: map[NameState]int{}, Workflows: map[NameState]int{},
		OldestReady: map[string]time.Duration{}, OldestHeartbeat: map[string]time.Duration{}}
}

// NameOf is the workflow name in a workflow execution ID, or "unknown"
// for an ID another client made in another form: never the ID itself.
func NameOf(workflowExecID string) string {
	name, err := state.WorkflowNameOf(workflowExecID)
	if err != nil || name == "" {
		return "unknown"
	}
	return name
}

func (s *Seen) listedActivities(st state.ActivityState, refs []state.ActivityRef, only string, now time.Time) {
	s.ActivityStates = append(s.ActivityStates, st)
	for _, ref := range refs {
		if only != "" && ref.WorkflowExecID != only {
			continue
		}
		name := NameOf(ref.WorkflowExecID)
		s.Activities[NameState{name, string(st)}]++
		if st == state.Ready && !ref.StateTime.IsZero() {
			s.OldestReady[name] = max(s.OldestReady[name], now.Sub(ref.StateTime))
		}
	}
}

func (s *Seen) listedWorkflows(st state.WorkflowState, wfs []*state.WorkflowExec, only string) {
	s.WorkflowStates = append(s.WorkflowStates, st)
	for _, wf := range wfs {
		if only != "" && wf.WorkflowExecID != only {
			continue
		}
		s.Workflows[NameState{NameOf(wf.WorkflowExecID), string(st)}]++
	}
}

func (s *Seen) beat(workflowExecID string, age time.Duration) {
	name := NameOf(workflowExecID)
	s.OldestHeartbeat[name] = max(s.OldestHeartbeat[name], age)
}
