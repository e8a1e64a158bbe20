package launcher_test

import (
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestMapOldestElementsFirst: a for_each map of 300 elements has its three
// pages READY at once; a launcher with room for 20 launches elements of
// the first page only, so that the map's oldest elements, which it counts
// first, are not left behind younger ones. Launched in random order, 20 of
// 300 would all be among the first 100 about once in 10^10 runs.
func TestMapOldestElementsFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) state.Store
	}{
		{"dynamodb", func(t *testing.T) state.Store { return dynamotest.NewStore(t, dynamodb.Options{}) }},
		{"sqlite", func(t *testing.T) state.Store {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := tc.open(t)
			id, _ := launchtest.Start(t, st, "name: oldest\nactivities:\n  m: {for_each: {count: 300}, command: [\"true\"]}\n")
			first := map[string]bool{}
			for i := 0; i < 100; i++ {
				first[state.ItemExecIDFor(id, "m", i)] = true
			}
			if _, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 299), WorkflowExecID: id}); err != nil {
				t.Fatalf("the map's last page is not written at its start: %v", err)
			}
			backend := &launchtest.Counting{}
			l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, MaxRunning: 20, Workers: 1})
			if n, err := l.Once(launchtest.Context(t)); n != 20 || err != nil {
				t.Fatalf("Once: %d launched, %v; want 20", n, err)
			}
			for k := range backend.Launches() {
				if !first[k.ActivityExecID] {
					t.Errorf("launched %s, an element past the first page, while elements of the first page were READY", k.ActivityExecID)
				}
			}
		})
	}
}
