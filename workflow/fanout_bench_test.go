package workflow

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// BenchmarkWrapperAdvance is what one wrapper of a fan-out (one root, n
// dependents) pays to read its definition and advance after its activity
// completed, on the embedded store: the stored definition read afresh,
// as in a new process, its own entry, and AdvanceKnown, which readies
// nothing and finds the workflow live. Its cost must not grow with n:
// compare the ns/op of n=500 and n=2000.
func BenchmarkWrapperAdvance(b *testing.B) {
	for _, n := range []int{500, 2000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.Install(ctx, false); err != nil {
				b.Fatal(err)
			}
			d := &Definition{Name: "fan", Activities: map[string]*Activity{"root": {Command: []string{"true"}}}}
			for i := range n {
				d.Activities[fmt.Sprintf("d%04d", i)] = &Activity{Command: []string{"true"}, DependsOn: []string{"root"}}
			}
			id, _, err := Start(ctx, st, d, StartOptions{})
			if err != nil {
				b.Fatal(err)
			}
			wf, err := st.GetWorkflow(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			// The root completed and readied every dependent; one of them
			// completed: its wrapper advances.
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "root"), WorkflowExecID: id}
			root := complete(b, st, k)
			if res, err := AdvanceKnown(ctx, st, wf, root, nil); err != nil || len(res.Readied) != n {
				b.Fatalf("advance after the root: %d readied, %v", len(res.Readied), err)
			}
			k.ActivityExecID = state.ActivityExecIDFor(id, "d0007")
			leaf := complete(b, st, k)
			b.ResetTimer()
			for b.Loop() {
				shared.Lock()
				shared.def = nil // as a new wrapper process: nothing read yet
				shared.Unlock()
				s, err := ReadStoredShared(wf.Definition)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Activity("d0007"); err != nil {
					b.Fatal(err)
				}
				res, err := AdvanceKnown(ctx, st, wf, leaf, nil)
				if err != nil || len(res.Readied) != 0 || res.Settled != "" {
					b.Fatalf("advance after a leaf: %+v, %v", res, err)
				}
			}
		})
	}
}

// complete claims a READY activity and records it COMPLETED.
func complete(b *testing.B, st state.Store, k state.ActivityKey) *state.ActivityExec {
	ctx := context.Background()
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: storetest.Claim("o")}); err != nil {
		b.Fatal(err)
	}
	a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"})
	if err != nil {
		b.Fatal(err)
	}
	return a
}
