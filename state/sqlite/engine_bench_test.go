package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// BenchmarkActivityCalls measures the store calls one activity's life
// makes on the embedded store (a launcher's read, its workflow read and
// claim, a heartbeat-sized conditional write), one process alone: what a
// call costs in CPU, not what contention adds.
func BenchmarkActivityCalls(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		b.Fatal(err)
	}
	var def strings.Builder
	def.WriteString("name: calls\nactivities:\n")
	for i := 0; i < 150; i++ {
		fmt.Fprintf(&def, "  t%04d: {command: [\"true\"]}\n", i)
	}
	d, err := definition.Parse("c.yaml", []byte(def.String()))
	if err != nil {
		b.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "t0000"), WorkflowExecID: id}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "bench"}}); err != nil {
		b.Fatal(err)
	}
	b.Run("GetActivity", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := st.GetActivity(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GetWorkflow", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := st.GetWorkflow(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadyQuery", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: 1000}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Heartbeat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := st.Heartbeat(ctx, k, "bench", time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
