package inspect_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
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
	seen := map[string]string{}
	for _, a := range s.Activities {
		seen[a.ID] = a.State
		if len(a.Earlier) > 0 {
			t.Errorf("%s shows earlier attempts %+v: another client's items are no attempts of each other", a.ID, a.Earlier)
		}
	}
	if got := seen[storetest.Key(w, "b").ActivityExecID]; got != string(state.Cancelled) {
		t.Errorf("b shows %q, want CANCELLED", got)
	}
}
