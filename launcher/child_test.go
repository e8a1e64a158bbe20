package launcher_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// childStores are the stores the child-workflow tests run on: what the
// participants use, and a clean view for the test's own checks (the
// same store, but for the fault proxy's).
func childStores(t *testing.T, withFaults bool, fn func(t *testing.T, st, clean state.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		fn(t, st, st)
	})
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		st := dynamotest.NewStore(t, dynamodb.Options{})
		fn(t, st, st)
	})
	if !withFaults {
		return
	}
	t.Run("dynamodb-faults", func(t *testing.T) {
		t.Parallel()
		p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
		prefix := dynamotest.Prefix(t)
		clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
		if _, err := clean.Install(launchtest.Context(t), false); err != nil {
			t.Fatal(err)
		}
		p.SetFaults(dynamotest.Faults{IndexLag: 300 * time.Millisecond, Throttle: 0.05, Errors: 0.1, AfterWrite: 0.5, PageSize: 3})
		fn(t, dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), clean)
		if s := p.Stats(); s.Errors+s.Throttled == 0 {
			t.Errorf("the proxy injected no fault: %s", s)
		}
	})
}

// loadParent writes a parent and its child definition and reads them.
func loadParent(t *testing.T) *definition.Workflow {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"parent.yaml": `name: parent
params:
  source: {default: orders}
activities:
  run:
    workflow: child.yaml
    params: {source: "{{ params.source }}"}
  after:
    depends_on: [run]
    command: ["echo", "{{ outputs.run.rows }}"]
`,
		"child.yaml": `name: child
params:
  source: {required: true}
outputs:
  rows: "{{ outputs.load.rows }}"
  from: "{{ params.source }}"
activities:
  load: {command: ["true"]}
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := definition.Load(filepath.Join(dir, "parent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// eventually repeats fn, a step that is safe to repeat, until it
// succeeds: behind the fault proxy a call may fail after it was applied.
func eventually(t *testing.T, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func childKey(id, name string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
}

// derivedChild is the ID of the child the first attempt of the parent's
// activity "run" starts.
func derivedChild(parentID string) string {
	return state.WorkflowExecIDForRequest("child", state.ChildRequestID("child", parentID, state.ActivityExecIDFor(parentID, "run"), workflow.ChildIndex, 1))
}

// TestThreeLaunchersStartOneChild: three launchers race for an activity
// that runs a child workflow, and three repairs race to start its child
// again: one child exists, derived from the parent, naming it. The
// parent activity is RUNNING with heartbeats off. Then the write that
// settles the child ends the parent activity with the child's outputs
// and readies the parent's next step, with no monitor at all on both
// stores; behind the fault proxy, with the monitor finishing what a
// lagging index or a failed write left.
func TestThreeLaunchersStartOneChild(t *testing.T) {
	t.Parallel()
	childStores(t, true, func(t *testing.T, st, clean state.Store) {
		ctx := launchtest.Context(t)
		d := loadParent(t)
		var id string
		eventually(t, "start", func() (err error) {
			id, _, err = workflow.Start(ctx, st, d, workflow.StartOptions{RequestID: "parent::req-" + t.Name()})
			return err
		})
		run := childKey(id, "run")
		// The launchers pass until the activity runs, bounded in time, not
		// in passes: behind the proxy the READY index lags, and on a fast
		// machine a count of passes can all go by before it shows the
		// activity.
		var wg sync.WaitGroup
		passUntil := time.Now().Add(time.Minute)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := launcher.New(st, launcher.Config{})
				for time.Now().Before(passUntil) {
					if a, err := clean.GetActivity(ctx, run); err == nil && a.State == state.Running {
						return
					}
					if _, err := l.Once(ctx); err != nil {
						t.Log(err)
					}
				}
			}()
		}
		wg.Wait()
		wf, err := clean.GetWorkflow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := clean.GetActivity(ctx, run)
				if err != nil {
					t.Error(err)
					return
				}
				eventually(t, "repair", func() error { _, err := workflow.StartChild(ctx, st.(workflow.Starter), wf, a, nil); return err })
			}()
		}
		wg.Wait()

		children, err := clean.Workflows(ctx, state.WorkflowQuery{Name: "child"})
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != 1 || children[0].WorkflowExecID != derivedChild(id) {
			t.Fatalf("children %v, want one: %s", children, derivedChild(id))
		}
		child, err := clean.GetWorkflow(ctx, derivedChild(id))
		if err != nil {
			t.Fatal(err)
		}
		if child.ParentWorkflowExecID != id || child.ParentActivityExecID != run.ActivityExecID || child.State != state.WorkflowRunning || child.Params != `{"source":"orders"}` {
			t.Errorf("child %+v, want RUNNING, naming its parent, with the params templated from it", child)
		}
		a, err := clean.GetActivity(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != state.Running || a.HeartbeatEnabled || !a.HeartbeatTime.IsZero() || a.LaunchedAs != child.WorkflowExecID {
			t.Errorf("parent activity %s, heartbeats %v (%v), launched as %q; want RUNNING with heartbeats off, launched as the child", a.State, a.HeartbeatEnabled, a.HeartbeatTime, a.LaunchedAs)
		}

		// The child's one activity completes, and its wrapper advances.
		load := childKey(child.WorkflowExecID, "load")
		var done *state.ActivityExec
		eventually(t, "complete the child's activity", func() error {
			cur, err := clean.GetActivity(ctx, load)
			if err != nil {
				return err
			}
			steps := []state.ActivityChange{
				{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "w"}},
				{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "w", Exit: &state.Exit{}, Output: `{"rows":7}`},
			}
			for _, c := range steps {
				if cur.State == c.From[0] {
					if cur, err = st.UpdateActivity(ctx, load, c); err != nil {
						return err
					}
				}
			}
			done = cur
			return nil
		})
		eventually(t, "advance", func() error { _, err := workflow.Advance(ctx, st, done, nil); return err })
		if st != clean {
			// Behind the proxy the advance may find the index behind (the
			// child not yet settled), or a write after the settle may
			// fail: what it leaves, the monitor finishes.
			m := monitor.New(st, monitor.Config{})
			eventually(t, "the monitor ends the parent activity", func() error {
				_, _ = m.Sweep(ctx)
				if a, err := clean.GetActivity(ctx, run); err != nil || a.State == state.Running {
					return fmt.Errorf("parent activity %v (%v)", a, err)
				}
				return nil
			})
		}
		a, err = clean.GetActivity(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != state.Completed || a.Output != `{"from":"orders","rows":"7"}` {
			t.Errorf("parent activity %s with output %s; want COMPLETED with the child's outputs", a.State, a.Output)
		}
		if after, err := clean.GetActivity(ctx, childKey(id, "after")); err != nil || after.State != state.Ready {
			t.Errorf("the parent's next activity: %v %v, want READY", after, err)
		}
	})
}

// TestMonitorRepairsChild: what a participant that died leaves of a
// child workflow, the monitor finishes: a parent activity claimed for a
// child never started has it started; a seed-shaped judgement never times
// the parent activity out; a child that settled without ending its
// parent activity has it ended, and the parent advanced, once; a live
// child whose parent activity was cancelled is cancelled.
func TestMonitorRepairsChild(t *testing.T) {
	t.Parallel()
	childStores(t, false, func(t *testing.T, st, _ state.Store) {
		ctx := launchtest.Context(t)
		d := loadParent(t)
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		run, childID := childKey(id, "run"), derivedChild(id)
		// A launcher claimed the activity for its child and died.
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:x"},
			{From: []state.ActivityState{state.Queued}, To: state.Running, Owner: "launcher:x", Claim: &state.Claim{Owner: state.ChildOwner(childID)}},
		} {
			if _, err := st.UpdateActivity(ctx, run, c); err != nil {
				t.Fatal(err)
			}
		}
		later := time.Now().Add(24 * time.Hour)
		m := monitor.New(st, monitor.Config{Now: func() time.Time { return later }})
		if _, err := m.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		child, err := st.GetWorkflow(ctx, childID)
		if err != nil {
			t.Fatalf("the monitor did not start the child: %v", err)
		}
		if a, _ := st.GetActivity(ctx, run); a.State != state.Running {
			t.Errorf("a day later the parent activity is %s, want RUNNING: its child lives", a.State)
		}

		// The child's activity completes and the workflow settles, but
		// whoever settled it died before ending the parent activity.
		load := childKey(childID, "load")
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "w"}},
			{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "w", Exit: &state.Exit{}, Output: `{"rows":3}`},
		} {
			if _, err := st.UpdateActivity(ctx, load, c); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.UpdateWorkflow(ctx, child.WorkflowExecID, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted}); err != nil {
			t.Fatal(err)
		}
		m = monitor.New(st, monitor.Config{})
		for range 2 {
			if _, err := m.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := st.GetActivity(ctx, run)
		if a.State != state.Completed || a.Output != `{"from":"orders","rows":"3"}` {
			t.Errorf("parent activity %s, output %s; want COMPLETED with the child's outputs", a.State, a.Output)
		}
		if after, _ := st.GetActivity(ctx, childKey(id, "after")); after.State != state.Ready {
			t.Errorf("the parent's next activity is %s, want READY", after.State)
		}

		// A second parent: its activity is cancelled, and the cancel does
		// not go down (its maker died).
		id2, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := launcher.New(st, launcher.Config{}).Once(ctx); err != nil {
			t.Fatal(err)
		}
		run2 := childKey(id2, "run")
		if _, err := st.UpdateActivity(ctx, run2, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.CancelledRunning}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if c, err := st.GetWorkflow(ctx, derivedChild(id2)); err != nil || c.State != state.WorkflowCancelled {
			t.Errorf("the child of a cancelled parent activity: %v %v, want CANCELLED", c, err)
		}
	})
}

// TestCancelGoesDown: cancelling the parent workflow cancels its running
// child in the same call, down to the child's running activity.
func TestCancelGoesDown(t *testing.T) {
	t.Parallel()
	childStores(t, false, func(t *testing.T, st, _ state.Store) {
		ctx := launchtest.Context(t)
		id, _, err := workflow.Start(ctx, st, loadParent(t), workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := launcher.New(st, launcher.Config{}).Once(ctx); err != nil {
			t.Fatal(err)
		}
		load := childKey(derivedChild(id), "load")
		if _, err := st.UpdateActivity(ctx, load, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: "w"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := workflow.Cancel(ctx, st, id, "test", nil); err != nil {
			t.Fatal(err)
		}
		c, err := st.GetWorkflow(ctx, derivedChild(id))
		if err != nil || c.State != state.WorkflowCancelled {
			t.Fatalf("child: %v %v, want CANCELLED", c, err)
		}
		if a, _ := st.GetActivity(ctx, load); a.State != state.CancelledRunning {
			t.Errorf("the child's running activity is %s, want CANCELLED_RUNNING", a.State)
		}
		if a, _ := st.GetActivity(ctx, childKey(id, "run")); a.State != state.CancelledRunning {
			t.Errorf("the parent activity is %s, want CANCELLED_RUNNING", a.State)
		}
	})
}
