package workflow_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

const oneAtATime = `
name: one-at-a-time
concurrency:
  max_active_runs: 1
activities:
  only:
    command: [true]
`

// TestMaxActiveRuns: of three starts of a workflow with max_active_runs 1,
// the first runs and the others wait REQUESTED, saying why; each run's
// settling write starts the oldest waiting one, and a repeated advance
// starts the next when the settler died before it could. Never two are
// RUNNING at once (sampled all along), and all three complete, oldest
// first.
func TestMaxActiveRuns(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st state.Store) { maxActiveRuns(t, st, st) })
	t.Run("dynamodb-faults", func(t *testing.T) {
		// Throttling and writes that fail after they applied: the slot's
		// conditional writes still hold the limit.
		t.Parallel()
		proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.5})
		prefix := dynamotest.Prefix(t)
		clean := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
		if _, err := clean.Install(testbin.Context(t), false); err != nil {
			t.Fatal(err)
		}
		maxActiveRuns(t, dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), clean)
	})
}

// maxActiveRuns starts and ends the runs through st, and checks through
// check (a store without faults: the test's own reads and the activities'
// moves, as a wrapper's, are not under test).
func maxActiveRuns(t *testing.T, st, check state.Store) {
	{
		ctx := testbin.Context(t)
		d, err := definition.Parse("w.yaml", []byte(oneAtATime))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := 0; i < 3; i++ {
			if i > 0 {
				time.Sleep(1100 * time.Millisecond) // start times are whole seconds: make the order theirs
			}
			var id string
			req := state.NewWorkflowRequestID(d.Name)
			again(t, func() (err error) { // a start that failed is finished by repeating it
				id, _, err = workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test", RequestID: req})
				return err
			})
			ids = append(ids, id)
		}
		// The sampler reads every run, consistently, until the test is done.
		sampleCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		most := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			running := func(id string) bool {
				wf, err := check.GetWorkflow(sampleCtx, id)
				return err == nil && wf.State == state.WorkflowRunning
			}
			for sampleCtx.Err() == nil {
				// Reads one after another are no snapshot: a run seen
				// RUNNING in both passes was RUNNING all the while
				// (nothing returns to RUNNING), so those were RUNNING at
				// once.
				var seen []string
				for _, id := range ids {
					if running(id) {
						seen = append(seen, id)
					}
				}
				n := 0
				for _, id := range seen {
					if running(id) {
						n++
					}
				}
				most = max(most, n)
			}
		}()
		stateOf := func(id string) *state.WorkflowExec {
			t.Helper()
			wf, err := check.GetWorkflow(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return wf
		}
		for _, id := range ids[1:] {
			wf := stateOf(id)
			if wf.State != state.WorkflowRequested {
				t.Fatalf("%s is %s while the first runs, want REQUESTED", id, wf.State)
			}
			if why := workflow.RunWaitReason(ctx, check, wf); why != "waiting: 1 of max_active_runs 1 running" {
				t.Errorf("wait reason %q", why)
			}
		}
		var order []string
		for i, id := range ids {
			if i > 0 && st != check && stateOf(id).State == state.WorkflowRequested {
				// Behind faults the settler's start of the next run can
				// fail (it logs it) or be skipped by a repeated call
				// whose settle had applied: the monitor's sweep starts
				// it, as it does here.
				again(t, func() error { _, err := workflow.StartWaiting(ctx, st, d.Name, nil); return err })
			}
			if got := stateOf(id).State; got != state.WorkflowRunning {
				t.Fatalf("run %d (%s) is %s, want RUNNING: the oldest waiting run goes first", i, id, got)
			}
			order = append(order, id)
			k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "only"), WorkflowExecID: id}
			a := end(t, check, k, state.Completed)
			if i == 1 {
				// The settler dies after its write: nothing frees the slot
				// but the monitor's call.
				if _, err := check.UpdateWorkflow(ctx, id, state.WorkflowChange{
					From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted}); err != nil {
					t.Fatal(err)
				}
				if got := stateOf(ids[2]).State; got != state.WorkflowRequested {
					t.Fatalf("the last run is %s before anyone started it", got)
				}
				// A repeated advance of the ended activity (the wrapper's
				// retry, or any participant's) finds the run settled and
				// starts the waiting one itself.
				again(t, func() error { _, err := workflow.Advance(ctx, st, a, nil); return err })
				if st != check && stateOf(ids[2]).State == state.WorkflowRequested {
					// Behind faults that start is best effort: the
					// monitor's sweep makes it.
					again(t, func() error { _, err := workflow.StartWaiting(ctx, st, d.Name, nil); return err })
				}
				continue
			}
			again(t, func() error { _, err := workflow.Advance(ctx, st, a, nil); return err })
		}
		stop()
		wg.Wait()
		for _, id := range ids {
			if got := stateOf(id).State; got != state.WorkflowCompleted {
				t.Errorf("%s is %s, want COMPLETED", id, got)
			}
		}
		if most > 1 {
			t.Errorf("%d runs were RUNNING at once, want at most 1", most)
		}
		if strings.Join(order, ",") != strings.Join(ids, ",") {
			t.Errorf("ran %v, want %v", order, ids)
		}
	}
}

// again calls fn until it succeeds, at most five times: what a participant
// does after a store's error.
func again(t *testing.T, fn func() error) {
	t.Helper()
	var err error
	for range 5 {
		if err = fn(); err == nil {
			return
		}
	}
	t.Fatal(err)
}
