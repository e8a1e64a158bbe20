package wrapper_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/wrapper"
)

// lossy lets the first claim land but loses its answer, after running
// meanwhile (what another participant does in that moment).
type lossy struct {
	state.Store
	once      sync.Once
	meanwhile func()
}

func (l *lossy) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	a, err := l.Store.UpdateActivity(ctx, k, c)
	lost := false
	if err == nil && c.Claim != nil {
		l.once.Do(func() {
			lost = true
			if l.meanwhile != nil {
				l.meanwhile()
			}
		})
	}
	if lost {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return a, err
}

func setup(t *testing.T) (*dynamodb.Store, *state.NewWorkflow, state.ActivityKey) {
	t.Helper()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil, "b": {"a"}})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
		t.Fatal(err)
	}
	return st, w, k
}

func runActivity(t *testing.T, st state.Store, k state.ActivityKey, marker string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return wrapper.Run(ctx, wrapper.Direct(st), wrapper.Config{Key: k, Command: []string{"touch", marker},
		Heartbeat: true, HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second, RecordTimeout: 10 * time.Second})
}

func ran(marker string) bool { _, err := os.Stat(marker); return err == nil }

func TestClaimWhoseAnswerWasLostRuns(t *testing.T) {
	t.Parallel()
	st, _, k := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	if code := runActivity(t, &lossy{Store: st}, k, marker); code != 0 || !ran(marker) {
		t.Fatalf("exit %d, ran %v: a claim that landed must be run", code, ran(marker))
	}
	if a, _ := st.GetActivity(context.Background(), k); a.State != state.Completed || a.Attempt != 1 {
		t.Errorf("activity %s attempt %d, want COMPLETED after one claim", a.State, a.Attempt)
	}
}

// TestClaimThatMovedOnIsNotRun: the claim landed, its answer was lost, and
// the monitor timed the activity out before the retry: the command must not
// run, and the state stays.
func TestClaimThatMovedOnIsNotRun(t *testing.T) {
	t.Parallel()
	st, w, k := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	l := &lossy{Store: st, meanwhile: func() {
		if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
			From: []state.ActivityState{state.Running}, To: state.TimedOut, Reason: "no heartbeat"}); err != nil {
			t.Error(err)
		}
	}}
	if code := runActivity(t, l, k, marker); code != state.ExitClaimRefused || ran(marker) {
		t.Fatalf("exit %d, ran %v; want %d and not run", code, ran(marker), state.ExitClaimRefused)
	}
	a, _ := st.GetActivity(context.Background(), k)
	if a.State != state.TimedOut || !strings.Contains(a.Reason, "claimed, but not started") {
		t.Errorf("activity %s %q", a.State, a.Reason)
	}
	if b, _ := st.GetActivity(context.Background(), storetest.Key(w, "b")); b.State != state.Cancelled {
		t.Errorf("downstream %s, want CANCELLED by the advance", b.State)
	}
}

// TestClaimRefusedAfterLandingIsRecorded: the claim landed, its answer was
// lost, and the workflow was cancelled before the retry, which refuses: the
// activity must not be left RUNNING with nobody running it.
func TestClaimRefusedAfterLandingIsRecorded(t *testing.T) {
	t.Parallel()
	st, w, k := setup(t)
	marker := filepath.Join(t.TempDir(), "ran")
	l := &lossy{Store: st, meanwhile: func() {
		if _, err := st.UpdateWorkflow(context.Background(), w.Exec.WorkflowExecID, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled}); err != nil {
			t.Error(err)
		}
	}}
	if code := runActivity(t, l, k, marker); code != state.ExitClaimRefused || ran(marker) {
		t.Fatalf("exit %d, ran %v", code, ran(marker))
	}
	a, _ := st.GetActivity(context.Background(), k)
	if a.State != state.Failed || !strings.Contains(a.Reason, "is CANCELLED, not RUNNING") {
		t.Errorf("activity %s %q, want FAILED with the refusal", a.State, a.Reason)
	}
}

// TestRunsItsOwnEntryOfAPartlyBrokenDefinition: the wrapper reads only
// its activity's entry of the stored definition (definition.Stored). An
// entry it does not concern that cannot be read (another writer's) does
// not stop it using its own: the definition's env reaches the command,
// and its dependent is readied from the definition.
func TestRunsItsOwnEntryOfAPartlyBrokenDefinition(t *testing.T) {
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "mixed", storetest.DAG{"a": nil, "b": {"a"}, "broken": nil})
	w.Exec.Definition = `{"name":"mixed","activities":{` +
		`"a":{"command":["sh","-c","printf %s \"$GREETING\" > \"$MARKER\""],"env":{"GREETING":"hello from the definition"}},` +
		`"b":{"command":["true"],"depends_on":["a"]},"broken":{"command":7,"depends_on":"a"}}}`
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "marker")
	t.Setenv("MARKER", marker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := wrapper.Run(ctx, wrapper.Direct(st), wrapper.Config{Key: k,
		Command:   []string{"sh", "-c", "printf %s \"$GREETING\" > \"$MARKER\""},
		Heartbeat: true, HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second, RecordTimeout: 10 * time.Second})
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "hello from the definition" {
		t.Fatalf("the command saw GREETING=%q (%v); want the definition's env", b, err)
	}
	b, err := st.GetActivity(context.Background(), storetest.Key(w, "b"))
	if err != nil || b.State != state.Ready {
		t.Fatalf("b: %+v, %v; want READY", b, err)
	}
}
