// Package inboxtest is the conformance suite of the Simple Lambda API's
// inbox (simpleapi/inbox.Inbox): simpleapi/dynamoinbox and
// simpleapi/sqliteinbox pass it, each on its backend, as the backends pass
// state/storetest.
package inboxtest

import (
	"errors"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// Harness makes a fresh store, with its inbox, for each test.
type Harness struct {
	New func(t *testing.T) (state.Store, inbox.Inbox)
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"Requests", testRequests},
		{"Events", testEvents},
		{"Registrations", testRegistrations},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

var (
	move     = storetest.Move
	claim    = storetest.Claim
	conflict = storetest.Conflict
)

func testRequests(t *testing.T, h Harness) {
	st, in := h.New(t)
	r := &state.WorkflowRequest{WorkflowRequestID: state.NewWorkflowRequestID("etl"), WorkflowName: "etl",
		When: state.Truncate(time.Now()), Source: "test"}
	if err := in.PutRequest(testbin.Context(t), r); err != nil {
		t.Fatalf("PutRequest: %v", err)
	}
	if err := in.PutRequest(testbin.Context(t), r); !errors.Is(err, state.ErrExists) {
		t.Errorf("second PutRequest: %v, want ErrExists", err)
	}
	got, err := st.GetRequest(testbin.Context(t), r.WorkflowRequestID, "etl")
	if err != nil || got.Manual || got.Outcome.Processed() || !got.When.Equal(r.When) {
		t.Fatalf("GetRequest = %+v, %v", got, err)
	}
	execID := state.WorkflowExecIDForRequest("etl", r.WorkflowRequestID)
	o := state.Outcome{Result: state.OutcomeStarted, Reason: "started", At: state.Truncate(time.Now())}
	if err := in.RecordRequest(testbin.Context(t), r.WorkflowRequestID, "etl", execID, o); err != nil {
		t.Fatalf("RecordRequest: %v", err)
	}
	got, err = st.GetRequest(testbin.Context(t), r.WorkflowRequestID, "etl")
	if err != nil || got.Outcome != o || got.WorkflowExecID != execID {
		t.Errorf("after RecordRequest: %+v, %v", got, err)
	}
	// The first outcome stays.
	err = in.RecordRequest(testbin.Context(t), r.WorkflowRequestID, "etl", "", state.Rejected("late"))
	if ce := conflict(t, err); ce.State != state.OutcomeStarted {
		t.Errorf("second RecordRequest: %v, want a conflict naming %q", err, state.OutcomeStarted)
	}
	if err := in.RecordRequest(testbin.Context(t), state.NewWorkflowRequestID("etl"), "etl", "", o); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("RecordRequest of a missing request: %v, want ErrNotFound", err)
	}
}

func testEvents(t *testing.T, h Harness) {
	st, in := h.New(t)
	w := storetest.NewWorkflow(t, "etl", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	base := state.Truncate(time.Now())
	code := 3
	ev := func(transition string, at time.Duration) *state.ActivityEvent {
		return &state.ActivityEvent{ActivityEventID: state.NewActivityEventID(k.ActivityExecID), ActivityExecID: k.ActivityExecID,
			WorkflowExecID: k.WorkflowExecID, When: base.Add(at), Transition: transition, Owner: "o1", ExitCode: &code}
	}
	// Written out of order; listed in the order of their when.
	late, early := ev("COMPLETED", 2*time.Second), ev("RUNNING", time.Second)
	for _, e := range []*state.ActivityEvent{late, early} {
		if err := in.PutEvent(testbin.Context(t), e); err != nil {
			t.Fatalf("PutEvent: %v", err)
		}
	}
	if err := in.PutEvent(testbin.Context(t), late); !errors.Is(err, state.ErrExists) {
		t.Errorf("second PutEvent: %v, want ErrExists", err)
	}
	var list []*state.ActivityEvent
	deadline := time.Now().Add(10 * time.Second) // the index is eventually consistent
	for len(list) < 2 && time.Now().Before(deadline) {
		var err error
		if list, err = in.Events(testbin.Context(t), k.ActivityExecID, time.Time{}); err != nil {
			t.Fatalf("Events: %v", err)
		}
	}
	if len(list) != 2 || list[0].ActivityEventID != early.ActivityEventID || list[1].ActivityEventID != late.ActivityEventID {
		t.Fatalf("Events = %+v, want the RUNNING event, then the COMPLETED one", list)
	}
	if from, err := in.Events(testbin.Context(t), k.ActivityExecID, late.When); err != nil || len(from) != 1 || from[0].ActivityEventID != late.ActivityEventID {
		t.Errorf("Events from the later one's when = %+v, %v; want only it", from, err)
	}
	if l := list[1]; l.WorkflowName != "etl" || l.Owner != "o1" || l.ExitCode == nil || *l.ExitCode != 3 || !l.When.Equal(late.When) {
		t.Errorf("event read back as %+v", l)
	}

	// A decision moves the activity and records the outcome atomically.
	move(t, st, k, state.Requested, state.Ready)
	applied := state.Outcome{Result: state.OutcomeApplied, At: base}
	a, err := in.Decide(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Running, Claim: claim("o1"),
	}, inbox.Step{Next: state.EventCursor(early), EventID: early.ActivityEventID, Outcome: &applied})
	if err != nil || a.State != state.Running || a.EventCursor != state.EventCursor(early) {
		t.Fatalf("deciding the RUNNING event: %+v, %v", a, err)
	}
	got, err := in.GetEvent(testbin.Context(t), early.ActivityEventID, k.ActivityExecID)
	if err != nil || got.Outcome != applied {
		t.Errorf("GetEvent after its decision: %+v, %v", got, err)
	}
	// Deciding it again fails on the cursor and changes nothing.
	_, err = in.Decide(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, Reason: "again",
	}, inbox.Step{Next: state.EventCursor(early) + "x", EventID: early.ActivityEventID, Outcome: &applied})
	conflict(t, err)
	// An event already decided is not decided again, even when the cursor
	// matches: both writes or neither.
	_, err = in.Decide(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, Reason: "again",
	}, inbox.Step{Prev: state.EventCursor(early), Next: state.EventCursor(late), EventID: early.ActivityEventID, Outcome: &applied})
	if !errors.Is(err, state.ErrConflict) {
		t.Errorf("deciding an event twice: %v, want a conflict", err)
	}
	if a, _ := st.GetActivity(testbin.Context(t), k); a.Reason == "again" || a.EventCursor != state.EventCursor(early) {
		t.Errorf("a refused decision wrote: %+v", a)
	}
	// A heartbeat through the cursor, with no outcome recorded.
	a, err = in.Decide(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, Owner: "o1", Beat: true, At: base.Add(1500 * time.Millisecond),
	}, inbox.Step{Prev: state.EventCursor(early), Next: state.EventCursor(early) + "hb"})
	if err != nil || !a.HeartbeatTime.Equal(base.Add(1500*time.Millisecond)) {
		t.Errorf("heartbeat event: %+v, %v", a, err)
	}
	rejected := state.Rejected("no")
	if err := in.RecordEvent(testbin.Context(t), late.ActivityEventID, k.ActivityExecID, rejected); err != nil {
		t.Fatalf("RecordEvent: %v", err)
	}
	if err := in.RecordEvent(testbin.Context(t), late.ActivityEventID, k.ActivityExecID, applied); conflict(t, err).State != state.OutcomeRejected {
		t.Errorf("second RecordEvent: %v", err)
	}
	if _, err := in.GetEvent(testbin.Context(t), state.NewActivityEventID(k.ActivityExecID), k.ActivityExecID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetEvent of a missing event: %v, want ErrNotFound", err)
	}
	// An event in the base contract's shape (no workflow_exec_id, no when_epoch;
	// here no when at all) is read, and listed once it has an outcome.
	seed := &state.ActivityEvent{ActivityEventID: state.NewActivityEventID(k.ActivityExecID), ActivityExecID: k.ActivityExecID,
		Transition: state.TransitionCancel}
	if err := in.PutEvent(testbin.Context(t), seed); err != nil {
		t.Fatalf("PutEvent in the base contract's shape: %v", err)
	}
	if got, err := in.GetEvent(testbin.Context(t), seed.ActivityEventID, k.ActivityExecID); err != nil || got.Transition != state.TransitionCancel || got.WorkflowExecID != "" {
		t.Errorf("GetEvent in the base contract's shape: %+v, %v", got, err)
	}
	if err := in.RecordEvent(testbin.Context(t), seed.ActivityEventID, k.ActivityExecID, rejected); err != nil {
		t.Fatalf("RecordEvent in the base contract's shape: %v", err)
	}
	found := false
	for deadline := time.Now().Add(10 * time.Second); !found && time.Now().Before(deadline); {
		list, err := in.Events(testbin.Context(t), k.ActivityExecID, time.Time{})
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		for _, e := range list {
			found = found || e.ActivityEventID == seed.ActivityEventID && e.Outcome.Result == state.OutcomeRejected
		}
	}
	if !found {
		t.Errorf("Events does not list the rejected event in the base contract's shape")
	}
	// Events go with their workflow.
	at := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	if err := st.Expire(testbin.Context(t), w.Exec.WorkflowExecID, at); err != nil {
		t.Fatalf("Expire: %v", err)
	}
	if got, err := in.GetEvent(testbin.Context(t), late.ActivityEventID, k.ActivityExecID); err != nil || got.Outcome.Result != state.OutcomeRejected {
		t.Errorf("GetEvent after Expire: %+v, %v", got, err)
	}
}

func testRegistrations(t *testing.T, h Harness) {
	_, in := h.New(t)
	if _, err := in.Registration(testbin.Context(t), "etl"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Registration of an unregistered workflow: %v, want ErrNotFound", err)
	}
	now := state.Truncate(time.Now())
	for _, r := range []*state.WorkflowLambda{
		{WorkflowName: "etl", Definition: `{"name":"etl"}`, Registered: now, Source: "test"},
		{WorkflowName: "backup", Lambda: "fn-a", Definition: `{"name":"backup"}`, Registered: now},
		{WorkflowName: "etl", Lambda: "fn-b", Definition: `{"name":"etl","v":2}`, Registered: now},
	} {
		if err := in.Register(testbin.Context(t), r); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	got, err := in.Registration(testbin.Context(t), "etl")
	if err != nil || got.Lambda != "fn-b" || got.Definition != `{"name":"etl","v":2}` || !got.Registered.Equal(now) {
		t.Errorf("Registration = %+v, %v; want the second registration", got, err)
	}
	all, err := in.Registrations(testbin.Context(t))
	if err != nil || len(all) != 2 || all[0].WorkflowName != "backup" || all[1].WorkflowName != "etl" {
		t.Errorf("Registrations = %+v, %v", all, err)
	}
	if err := in.Register(testbin.Context(t), &state.WorkflowLambda{WorkflowName: "no spaces"}); err == nil {
		t.Error("Register took an invalid name")
	}
}
