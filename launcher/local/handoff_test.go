package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// listingStore counts the READY listings a launcher makes through it, and
// the writes of launched_as.
type listingStore struct {
	state.Store
	listings, records atomic.Int64
}

func (s *listingStore) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	if c.LaunchedAs != "" {
		s.records.Add(1)
	}
	return s.Store.UpdateActivity(ctx, k, c)
}

func (s *listingStore) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	if q.State == state.Ready {
		s.listings.Add(1)
	}
	return s.Store.ActivitiesInState(ctx, q)
}

// TestInlineHandoff: the dependents an activity supervised inline readies
// are handed to the launcher's pass, which launches them without listing
// the READY index; and each activity's launched_as is written by its
// claim, not by a write of the launcher's after. The launcher's interval is a minute, so after its
// first pass (the one listing, which finds the chain's root) nothing but
// the handoff can start the rest of the chain within the test's wait. On
// DynamoDB behind the fault proxy the state index lags the table by
// seconds (and calls are throttled): a listing would not even see a
// dependent just readied.
func TestInlineHandoff(t *testing.T) {
	t.Parallel()
	const lag = 3 * time.Second
	stores := []struct {
		name string
		lag  time.Duration
		open func(t *testing.T) (st, own state.Store)
	}{
		{"sqlite", 0, func(t *testing.T) (state.Store, state.Store) {
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
		{"dynamodb", 0, func(t *testing.T) (state.Store, state.Store) {
			st := dynamotest.NewStore(t, dynamodb.Options{})
			return st, st
		}},
		{"dynamodb behind the fault proxy", lag, func(t *testing.T) (state.Store, state.Store) {
			proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, PageSize: 7,
				IndexLags: map[string]time.Duration{"state-shard-index": lag}})
			prefix := dynamotest.Prefix(t)
			setup := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			if _, err := setup.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), setup
		}},
	}
	for _, tc := range stores {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			const n = 5
			var def strings.Builder
			def.WriteString("name: handoff\nactivities:\n")
			for i := range n {
				fmt.Fprintf(&def, "  s%d:\n    command: [\"true\"]\n", i)
				if i > 0 {
					fmt.Fprintf(&def, "    depends_on: [s%d]\n", i-1)
				}
			}
			id, _ := launchtest.Start(t, own, def.String())
			time.Sleep(tc.lag) // the root is in the lagging index before the one listing
			counted := &listingStore{Store: st}
			lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline, Store: st,
				Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
			l := local.NewLauncher(counted, launcher.Config{Interval: time.Minute}, lb, nil)
			ctx, cancel := context.WithCancel(launchtest.Context(t))
			done := make(chan error, 1)
			go func() { done <- l.Run(ctx) }()
			defer func() {
				cancel()
				<-done
				lb.Stop(30 * time.Second)
			}()
			wf := launchtest.WaitSettled(t, own, id, 45*time.Second)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range acts {
				if a.State != state.Completed || a.Attempt != 1 || !strings.HasPrefix(a.LaunchedAs, "inline:") {
					t.Errorf("%s: %s, attempt %d, launched as %q; want COMPLETED at its first attempt, inline", a.ActivityExecID, a.State, a.Attempt, a.LaunchedAs)
				}
			}
			if got := counted.listings.Load(); got != 1 {
				t.Errorf("the launcher listed the READY index %d times, want 1 (its first pass): the chain's dependents were handed over", got)
			}
			// The claim of each activity supervised inline wrote its
			// launched_as: the launcher wrote none.
			if got := counted.records.Load(); got != 0 {
				t.Errorf("the launcher wrote launched_as %d times, want 0", got)
			}
			if got := l.Listings(); got != 1 {
				t.Errorf("Listings() = %d, want 1", got)
			}
		})
	}
}
