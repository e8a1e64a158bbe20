//go:build linux

package metrics

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestEndingsCountedOnce: two launchers each launched one attempt of a
// workflow; each counts its own attempt's ending, and only the launcher
// of the attempt that ended last counts the workflow's, whichever looks
// first, and however often they look.
func TestEndingsCountedOnce(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil, "b": nil})
	storetest.Create(t, st, w)
	m1, m2 := New(), New()
	e1, e2 := newEndings(m1, st, nil, time.Hour), newEndings(m2, st, nil, time.Hour)
	base := state.Truncate(time.Now()).Add(-time.Minute)
	// b (launcher 2's) ends a second after a (launcher 1's): b is the
	// last to end, though its ID sorts after a's either way.
	for i, c := range []struct {
		name string
		e    *endings
		to   state.ActivityState
	}{{"a", e1, state.Completed}, {"b", e2, state.Failed}} {
		k := storetest.Key(w, c.name)
		for _, ch := range []state.ActivityChange{
			{From: []state.ActivityState{state.Requested}, To: state.Queued, At: base},
			{From: []state.ActivityState{state.Queued}, To: state.Running, At: base.Add(time.Second), Claim: &state.Claim{Owner: "o" + c.name}},
		} {
			if _, err := st.UpdateActivity(ctx, k, ch); err != nil {
				t.Fatal(err)
			}
		}
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		c.e.Launched(a, "local", time.Second)
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: c.to,
			Owner: "o" + c.name, At: base.Add(time.Duration(10+i) * time.Second), Exit: &state.Exit{Code: i}}); err != nil {
			t.Fatal(err)
		}
	}
	// Both look before the workflow has settled: activities only.
	for _, e := range []*endings{e2, e1} {
		if err := e.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpdateWorkflow(ctx, w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed, At: base.Add(12 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for _, e := range []*endings{e1, e2} {
			if err := e.round(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"launcher 1: a completed", testutil.ToFloat64(m1.activitiesEnded.WithLabelValues("wf", "a", "completed")), 1},
		{"launcher 2: b failed", testutil.ToFloat64(m2.activitiesEnded.WithLabelValues("wf", "b", "failed")), 1},
		{"launcher 1: activities ended", float64(testutil.CollectAndCount(m1.activitiesEnded)), 1},
		{"launcher 2: activities ended", float64(testutil.CollectAndCount(m2.activitiesEnded)), 1},
		{"launcher 1: workflows ended", float64(testutil.CollectAndCount(m1.workflowsEnded)), 0},
		{"launcher 2: wf failed", testutil.ToFloat64(m2.workflowsEnded.WithLabelValues("wf", "failed")), 1},
		{"launcher 2: attempts still followed", testutil.ToFloat64(m2.tracked), 0},
		{"launcher 1: attempts still followed", testutil.ToFloat64(m1.tracked), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %g, want %g", c.what, c.got, c.want)
		}
	}
}
