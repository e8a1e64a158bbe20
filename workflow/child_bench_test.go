package workflow_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// BenchmarkChildRoundTrip is what a child workflow adds around its own
// activities, on the embedded store: a parent of one activity that runs
// a child of one activity, from the parent's start through the launcher's
// claim, the child's start, its activity's run and advance, to the
// parent settled by the child's settling write. Compare with
// BenchmarkLeafRoundTrip, the same parent running its command itself.
func BenchmarkChildRoundTrip(b *testing.B) {
	child := &definition.Workflow{Name: "child", Activities: map[string]*definition.Activity{"inner": {Command: []string{"true"}}}}
	parent := &definition.Workflow{Name: "parent", Activities: map[string]*definition.Activity{
		"run": {Workflow: &definition.ChildWorkflow{File: "child.yaml", Definition: child}}}}
	roundTrips(b, parent, func(ctx context.Context, st state.Store, id string, a *state.ActivityExec) {
		wf, err := st.GetWorkflow(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		childID, err := workflow.StartChild(ctx, st, wf, a, nil)
		if err != nil {
			b.Fatal(err)
		}
		leaf(ctx, b, st, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(childID, "inner"), WorkflowExecID: childID})
	})
}

// BenchmarkLeafRoundTrip is BenchmarkChildRoundTrip's parent running a
// command itself.
func BenchmarkLeafRoundTrip(b *testing.B) {
	parent := &definition.Workflow{Name: "parent", Activities: map[string]*definition.Activity{"run": {Command: []string{"true"}}}}
	roundTrips(b, parent, func(ctx context.Context, st state.Store, _ string, a *state.ActivityExec) {
		leaf(ctx, b, st, a.ActivityKey)
	})
}

// roundTrips starts d b.N times; run carries its one activity, QUEUED by
// a launcher, to its end, and the parent must then be settled.
func roundTrips(b *testing.B, d *definition.Workflow, run func(context.Context, state.Store, string, *state.ActivityExec)) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "run"), WorkflowExecID: id}
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:b"})
		if err != nil {
			b.Fatal(err)
		}
		run(ctx, st, id, a)
		if wf, err := st.GetWorkflow(ctx, id); err != nil || wf.State != state.WorkflowCompleted {
			b.Fatalf("parent %v %v, want COMPLETED", wf, err)
		}
	}
}

// leaf runs one activity as its wrapper does: claim, complete, advance.
func leaf(ctx context.Context, b *testing.B, st state.Store, k state.ActivityKey) {
	a, err := st.GetActivity(ctx, k)
	if err != nil {
		b.Fatal(err)
	}
	from := []state.ActivityState{a.State}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: from, To: state.Running, Owner: a.Owner, Claim: &state.Claim{Owner: "w"}}); err != nil {
		b.Fatal(err)
	}
	done, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "w", Exit: &state.Exit{}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := workflow.Advance(ctx, st, done, nil); err != nil {
		b.Fatal(err)
	}
}
