package inspect_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestForeignItemsAreEachShown: another client's workflow may give many
// activities one activity_name. It has no retries: status shows each of
// them as an activity, none as an earlier attempt of another.
func TestForeignItemsAreEachShown(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": nil, "c": nil})
	w.Exec.Definition = ""
	for i := range w.Activities {
		w.Activities[i].ActivityName = "task"
	}
	storetest.Create(t, st, w)
	if _, err := st.UpdateActivity(ctx, storetest.Key(w, "b"), state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Cancelled}); err != nil {
		t.Fatal(err)
	}
	s, err := inspect.Load(ctx, st, w.Exec.WorkflowExecID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Activities) != 3 {
		t.Fatalf("status shows %d activities, want 3: %+v", len(s.Activities), s.Activities)
	}
	seen := map[string]state.ActivityState{}
	for _, a := range s.Activities {
		seen[a.ID] = a.State
		if len(a.Earlier) > 0 {
			t.Errorf("%s shows earlier attempts %+v: another client's items are no attempts of each other", a.ID, a.Earlier)
		}
	}
	if got := seen[storetest.Key(w, "b").ActivityExecID]; got != state.Cancelled {
		t.Errorf("b shows %q, want CANCELLED", got)
	}
}

// TestEarlierAttemptsShowTheirRejectedEvents: a Simple Lambda API event
// refused for an attempt that was then retried is still shown, under that
// attempt.
func TestEarlierAttemptsShowTheirRejectedEvents(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	// The store as the commands open it: with the inbox in its tables.
	st := struct {
		*sqlite.Store
		*sqliteinbox.Inbox
	}{db, sqliteinbox.New(db)}
	d, err := definition.Parse("r.yaml", []byte("name: r\ndefaults:\n  retry: {max_attempts: 2, interval: 1h}\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: storetest.Claim("o")}); err != nil {
		t.Fatal(err)
	}
	failed, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := workflow.Advance(ctx, st, failed, nil); err != nil || res.Retried == "" {
		t.Fatalf("Advance = %+v, %v; want a retry", res, err)
	}
	ev := &state.ActivityEvent{ActivityEventID: k.ActivityExecID + "::ev1", ActivityExecID: k.ActivityExecID, WorkflowExecID: id,
		When: time.Now(), Source: "test", Transition: state.TransitionHeartbeat, Owner: "o"}
	if err := st.PutEvent(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordEvent(ctx, ev.ActivityEventID, k.ActivityExecID, state.Outcome{Result: state.OutcomeRejected,
		Reason: "a heartbeat of an activity that is FAILED", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	s, err := inspect.Load(ctx, st, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Activities) != 1 || len(s.Activities[0].Earlier) != 1 {
		t.Fatalf("want one activity with one earlier attempt: %+v", s.Activities)
	}
	if r := s.Activities[0].Earlier[0].Rejected; len(r) != 1 || r[0].ID != ev.ActivityEventID {
		t.Errorf("the earlier attempt shows rejected events %+v, want %s", r, ev.ActivityEventID)
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "rejected event HEARTBEAT ("+ev.ActivityEventID+")") {
		t.Errorf("the text does not show the rejected event:\n%s", b.String())
	}
}
