package simpleapi_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestSimpleAPIRetries: through the Simple Lambda API, an attempt whose
// FAILED event a processor applies is retried by the same core advance:
// the next attempt is a new item, the dependent waits for it, and the
// retry's own events, under its own ID, complete the activity.
func TestSimpleAPIRetries(t *testing.T) {
	t.Parallel()
	e := &env{t: t, st: newStore(t), client: dynamotest.Client(t), streams: dynamotest.Streams(t)}
	def, err := definition.Parse("simple.yaml", []byte("name: simple-retry\ndefaults:\n  retry: {max_attempts: 2, interval: 10ms}\n"+
		"activities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e.def = def
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// event writes an activity_event for one attempt, as a client would.
	event := func(actID, transition string, at time.Time, extra map[string]types.AttributeValue) {
		item := map[string]types.AttributeValue{"activity_event_id": s(actID + "::" + uuid.NewString()), "activity_exec_id": s(actID),
			"workflow_exec_id": s(execID), "transition": s(transition), "source": s("aws-sdk test")}
		when(item, at)
		for k, v := range extra {
			item[k] = v
		}
		e.put(dynamodb.TableActivityEvent, item)
	}
	first := state.ActivityExecIDFor(execID, "a")
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	event(first, "RUNNING", t0, map[string]types.AttributeValue{"owner": s("w1")})
	event(first, "FAILED", t0.Add(time.Second), map[string]types.AttributeValue{"owner": s("w1"), "exit_code": n("1")})
	p := e.processor("p")
	e.process(p, e.records(dynamodb.TableActivityEvent))

	a := e.activity(execID, "a")
	next := state.RetryIDFor(first)
	if a.State != state.Failed || a.RetriedBy != next {
		t.Fatalf("first attempt %s retried_by %q, want FAILED and retried by %s", a.State, a.RetriedBy, next)
	}
	retry, err := e.st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: next, WorkflowExecID: execID})
	if err != nil || retry.State != state.Ready || retry.Attempt != 2 {
		t.Fatalf("retry %+v %v", retry, err)
	}
	if b := e.activity(execID, "b"); b.State != state.Requested {
		t.Errorf("b is %s while a retry is pending, want REQUESTED", b.State)
	}

	event(next, "RUNNING", t0.Add(2*time.Second), map[string]types.AttributeValue{"owner": s("w2")})
	event(next, "COMPLETED", t0.Add(3*time.Second), map[string]types.AttributeValue{"owner": s("w2"), "exit_code": n("0")})
	e.process(p, e.records(dynamodb.TableActivityEvent)) // the earlier records again, too: harmless

	done, err := e.st.GetActivity(testbin.Context(t), retry.ActivityKey)
	if err != nil || done.State != state.Completed || done.Attempt != 2 {
		t.Fatalf("retry after its events: %+v %v", done, err)
	}
	if b := e.activity(execID, "b"); b.State != state.Ready {
		t.Errorf("b is %s after the retry completed, want READY", b.State)
	}
	if n := len(mustActivities(t, e, execID)); n != 3 {
		t.Errorf("%d activity items, want 3 (a twice, b)", n)
	}
}

func mustActivities(t *testing.T, e *env, id string) []*state.ActivityExec {
	t.Helper()
	acts, err := e.st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return acts
}
