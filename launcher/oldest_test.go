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
		open func(t *testing.T) (setup, launch state.Store)
	}{
		{"dynamodb", func(t *testing.T) (state.Store, state.Store) {
			st := dynamotest.NewStore(t, dynamodb.Options{})
			return st, st
		}},
		{"dynamodb behind the fault proxy", func(t *testing.T) (state.Store, state.Store) {
			// Queries cut into pages of 7 and throttled or failed calls:
			// the shards of the READY index come back in no particular
			// order, and the launcher sorts them all the same.
			proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.5, PartialBatches: true, PageSize: 7})
			prefix := dynamotest.Prefix(t)
			setup := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			if _, err := setup.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return setup, dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
		}},
		{"sqlite", func(t *testing.T) (state.Store, state.Store) {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return st, st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, launchSt := tc.open(t)
			id, _ := launchtest.Start(t, st, "name: oldest\nactivities:\n  m: {for_each: {count: 300}, command: [\"true\"]}\n")
			first := map[string]bool{}
			for i := 0; i < 100; i++ {
				first[state.ItemExecIDFor(id, "m", i)] = true
			}
			if _, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "m", 299), WorkflowExecID: id}); err != nil {
				t.Fatalf("the map's last page is not written at its start: %v", err)
			}
			backend := &launchtest.Counting{}
			l := launcher.New(launchSt, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, MaxRunning: 20, Workers: 1})
			// Behind the fault proxy a launch may fail; one pass after
			// another takes the oldest still READY.
			for launched, pass := 0, 0; launched < 20; pass++ {
				n, err := l.Once(launchtest.Context(t))
				if err != nil && pass >= 20 {
					t.Fatalf("Once: %d launched in %d passes, %v; want 20", launched, pass, err)
				}
				launched += n
				if pass >= 20 {
					t.Fatalf("%d launched in %d passes, want 20", launched, pass)
				}
			}
			for k := range backend.Launches() {
				if !first[k.ActivityExecID] {
					t.Errorf("launched %s, an element past the first page, while elements of the first page were READY", k.ActivityExecID)
				}
			}
		})
	}
}
