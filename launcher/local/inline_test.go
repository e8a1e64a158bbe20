package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// inlineStores are the stores the inline tests run on: the embedded
// store, DynamoDB Local, and DynamoDB Local behind the fault proxy
// (throttles, failures after applying, partial batches), whose launcher
// and wrappers share one faulty client as they share the process. open
// returns the launcher's store and the test's own: the test's starts,
// writes and check reads go through the proxy's clean side, so that a
// fault it injects is one the launcher and its activities must survive,
// not one that fails the test's own set-up.
func inlineStores() []struct {
	name string
	open func(t *testing.T) (st, own state.Store)
} {
	return []struct {
		name string
		open func(t *testing.T) (st, own state.Store)
	}{
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
		{"dynamodb", func(t *testing.T) (state.Store, state.Store) {
			st := dynamotest.NewStore(t, dynamodb.Options{})
			return st, st
		}},
		{"dynamodb behind the fault proxy", func(t *testing.T) (state.Store, state.Store) {
			proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.3, PartialBatches: true, PageSize: 7})
			prefix := dynamotest.Prefix(t)
			setup := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			if _, err := setup.Install(launchtest.Context(t), false); err != nil {
				t.Fatal(err)
			}
			return dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), setup
		}},
	}
}

// runInline runs a launcher whose local backend supervises inline until
// the test ends. Its wrapper binary does not exist: nothing may start a
// whimbrel-run process.
func runInline(t *testing.T, st state.Store) *local.Backend {
	t.Helper()
	lb := &local.Backend{Wrapper: "/nonexistent/whimbrel-run", LogDir: t.TempDir(), Supervise: local.SuperviseInline,
		Env: []string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=debug"}}
	l := local.NewLauncher(st, launcher.Config{Interval: 500 * time.Millisecond}, lb, nil)
	ctx, cancel := context.WithCancel(launchtest.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		lb.Stop(30 * time.Second)
	})
	return lb
}

// TestInlineWorkflow runs, with every activity supervised inside the
// launcher's process: a small DAG whose outputs reach the next
// activity's inputs, an activity that fails once and is retried, and a
// for_each of four elements. Every activity runs its command once per
// attempt and is recorded as whimbrel-run would record it.
func TestInlineWorkflow(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			flag := filepath.Join(t.TempDir(), "failed-once")
			id, _ := launchtest.Start(t, own, `name: inline
defaults: {heartbeat_interval: 1s, heartbeat_timeout: 20s}
activities:
  count:
    command: [sh, -c, 'echo "{\"n\": 41}" > "$WHIMBREL_OUTPUT"']
  add:
    depends_on: [count]
    env: {N: "{{ outputs.count.n }}"}
    command: [sh, -c, 'test "$N" = 41 && grep -q "\"n\":41" "$WHIMBREL_INPUTS" && echo "{\"sum\": 42}" > "$WHIMBREL_OUTPUT"']
  flaky:
    depends_on: [count]
    retry: {max_attempts: 3, interval: 1s, jitter: none}
    command: [sh, -c, 'if [ -e `+flag+` ]; then exit 0; fi; touch `+flag+`; echo "failing once" >&2; exit 75']
  each:
    depends_on: [add, flaky]
    for_each: {count: 4}
    command: [sh, -c, 'test -n "$WHIMBREL_ACTIVITY_EXEC_ID" && test -z "$WHIMBREL_LAUNCHER_NUDGE"']
`)
			lb := runInline(t, st)
			// An advance whose calls fail past the SDK's retries leaves
			// the rest to the monitor (docs/contract.md): behind the
			// fault proxy that happens, so one runs here as in any fleet.
			runMonitor(t, st)
			wf := launchtest.WaitSettled(t, own, id, 2*time.Minute)
			acts, err := own.Activities(launchtest.Context(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if wf.State != state.WorkflowCompleted {
				for _, a := range acts {
					t.Logf("%s: %s %s", a.ActivityExecID, a.State, a.Reason)
				}
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			elements, retried := 0, false
			for _, a := range acts {
				if a.State != state.Completed {
					continue
				}
				if a.Map == "" && !strings.HasPrefix(a.LaunchedAs, "inline:") {
					t.Errorf("%s launched as %q, want inline:", a.ActivityExecID, a.LaunchedAs)
				}
				if a.ActivityName == "flaky" && a.Attempt == 2 {
					retried = true
				}
				if a.ActivityName == "each" && a.ItemIndex != nil {
					elements++
				}
				if a.ActivityName == "add" && !strings.Contains(a.Output, `"sum":42`) && !strings.Contains(a.Output, `"sum": 42`) {
					t.Errorf("add's output %q", a.Output)
				}
			}
			if !retried || elements != 4 {
				t.Errorf("flaky completed on its second attempt: %v; elements of each completed: %d, want 4", retried, elements)
			}
			// The run that settled the workflow ends once its advance
			// returns, a moment after the settle it wrote.
			for deadline := time.Now().Add(30 * time.Second); lb.Running() != 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d activities still supervised 30 s after the workflow settled", lb.Running())
				}
			}
		})
	}
}

// TestInlineCancelStopsTheCommand: cancelling the workflow of an activity
// supervised inline stops its command (SIGTERM to its process group) and
// records CANCELLED_RUNNING.
func TestInlineCancelStopsTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range inlineStores() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, own := tc.open(t)
			pidFile := filepath.Join(t.TempDir(), "pid")
			id, _ := launchtest.Start(t, own, `name: cancel
activities:
  long:
    heartbeat_interval: 1s
    heartbeat_timeout: 20s
    command: [sh, -c, 'echo $$ > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; exec sleep 300']
`)
			runInline(t, st)
			pid := testbin.PIDFile(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if _, err := workflow.Cancel(launchtest.Context(t), own, id, "test cancels", nil); err != nil {
				t.Fatal(err)
			}
			testbin.WaitEnded(t, pid, "the command of a cancelled activity supervised inline")
			key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "long"), WorkflowExecID: id}
			deadline := time.Now().Add(time.Minute)
			for {
				a, err := own.GetActivity(launchtest.Context(t), key)
				if err == nil && a.State == state.CancelledRunning && !a.EndTime.IsZero() {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("activity: %+v %v, want CANCELLED_RUNNING with an end time", a, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}
