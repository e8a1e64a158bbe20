package wrapper_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
	"github.com/whimbrel/whimbrel/wrapper"
)

// slowElements answers each read of an element of a map late, as a
// loaded store behind throttles does.
type slowElements struct {
	state.Store
	delay time.Duration
}

func (s slowElements) GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	if strings.HasPrefix(k.ActivityExecID, "each::") {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Store.GetActivity(ctx, k)
}

// testStores opens each store a test runs on, installed.
var testStores = map[string]func(t *testing.T) state.Store{
	"dynamodb": func(t *testing.T) state.Store { return dynamotest.NewStore(t, dynamodb.Options{}) },
	"sqlite": func(t *testing.T) state.Store {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		return st
	},
}

// endedMap starts a workflow of a map of n elements and a downstream
// that copies the map's outputs file to copied, records every element
// COMPLETED with an output of its own (raw writes, as a stranger's
// wrapper would), ends the map, and queues the downstream. It returns
// the downstream's key and command.
func endedMap(ctx context.Context, t *testing.T, st state.Store, n int, copied string) (state.ActivityKey, []string) {
	t.Helper()
	command := []string{"cp", "{{ outputs.each.outputs_file }}", copied}
	d, err := definition.Parse("map.yaml", []byte(fmt.Sprintf(`name: slowmap
activities:
  each: {for_each: {count: %d}, command: ["true"]}
  join: {depends_on: [each], command: [%q, %q, %q]}
`, n, command[0], command[1], command[2])))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "each", i), WorkflowExecID: id}
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Ready}, To: state.Queued},
			{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o", Host: "h"}},
			{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o", Exit: &state.Exit{}, Output: fmt.Sprintf(`{"i":%d}`, i)},
		} {
			if _, err := st.UpdateActivity(ctx, k, c); err != nil {
				t.Fatalf("element %d: %v", i, err)
			}
		}
	}
	m, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "each"), WorkflowExecID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.StepMap(ctx, st, m, false, nil); err != nil {
		t.Fatal(err)
	}
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "join"), WorkflowExecID: id}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued}); err != nil {
		t.Fatalf("the downstream is not READY after the map ended: %v", err)
	}
	return k, command
}

// TestMapDownstreamBeatsWhilePreparing: the downstream of a map of 100
// elements reads every element's output before its command starts, and
// each read is slow: reading them takes longer than half the lease (1 s
// of a 2 s timeout), the most the lease holds without a beat. The wrapper
// beats while it prepares, so the command starts, sees every element's
// output in order, and the activity completes, on both stores.
func TestMapDownstreamBeatsWhilePreparing(t *testing.T) {
	t.Parallel()
	for name, open := range testStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st := open(t)
			const n = 100
			copied := filepath.Join(t.TempDir(), "outputs.jsonl")
			k, command := endedMap(ctx, t, st, n, copied)
			code := wrapper.Run(ctx, wrapper.Direct(slowElements{Store: st, delay: 400 * time.Millisecond}), wrapper.Config{
				Key: k, Command: command, Heartbeat: true, HeartbeatInterval: 300 * time.Millisecond, HeartbeatTimeout: 2 * time.Second,
				RecordTimeout: 10 * time.Second, DataDir: t.TempDir(),
			})
			a, err := st.GetActivity(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if code != 0 || a.State != state.Completed {
				t.Fatalf("exit %d; the downstream is %s: %s", code, a.State, a.Reason)
			}
			if !a.HeartbeatTime.After(a.StartTime) {
				t.Errorf("no heartbeat landed while the downstream prepared: heartbeat %v, start %v", a.HeartbeatTime, a.StartTime)
			}
			b, err := os.ReadFile(copied)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(lines) != n {
				t.Fatalf("the outputs file has %d lines, want %d", len(lines), n)
			}
			for i, l := range lines {
				if want := fmt.Sprintf(`{"i":%d}`, i); l != want {
					t.Errorf("line %d is %s, want %s", i, l, want)
				}
			}
		})
	}
}

// TestCancelWhilePreparingStartsNothing: the downstream of a map is
// cancelled while its wrapper reads the elements' outputs. The beat that
// follows hears it: the command is not started, and the activity stays
// CANCELLED_RUNNING, its reason saying why nothing ran.
func TestCancelWhilePreparingStartsNothing(t *testing.T) {
	t.Parallel()
	for name, open := range testStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st := open(t)
			copied := filepath.Join(t.TempDir(), "outputs.jsonl")
			k, command := endedMap(ctx, t, st, 100, copied)
			go func() {
				// Once claimed, cancel it, as whimbrel cancel does.
				for ctx.Err() == nil {
					a, err := st.GetActivity(ctx, k)
					if err == nil && a.State == state.Running {
						if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{
							From: []state.ActivityState{state.Running}, To: state.CancelledRunning, Reason: "cancelled by a test"}); err != nil {
							t.Error(err)
						}
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
			code := wrapper.Run(ctx, wrapper.Direct(slowElements{Store: st, delay: time.Second}), wrapper.Config{
				Key: k, Command: command, Heartbeat: true, HeartbeatInterval: 300 * time.Millisecond, HeartbeatTimeout: 2 * time.Second,
				RecordTimeout: 10 * time.Second, DataDir: t.TempDir(),
			})
			a, err := st.GetActivity(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			if code == 0 || a.State != state.CancelledRunning || !strings.Contains(a.Reason, "the lease was lost while the data was prepared") {
				t.Errorf("exit %d; the downstream is %s: %q; want CANCELLED_RUNNING, not started", code, a.State, a.Reason)
			}
			if _, err := os.Stat(copied); err == nil {
				t.Error("the command ran")
			}
		})
	}
}
