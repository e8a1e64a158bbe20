package simpleapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

const withParams = `
name: data-wf
params:
  base: {required: true}
defaults:
  heartbeat_interval: 10s
  heartbeat_timeout: 40s
activities:
  a: {command: ["true"]}
  b: {command: ["echo", "{{ params.base }}"]}
`

// TestSimpleAPIData: a Simple Lambda API client gives parameters with
// its request (checked before anything is started), progress with its
// heartbeat events, and an output with its COMPLETED event.
func TestSimpleAPIData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.register(withParams)

	without := "data-wf::" + uuid.NewString()
	with := "data-wf::" + uuid.NewString()
	item := requestItem(without, "data-wf")
	e.put(dynamodb.TableWorkflowRequest, item)
	item = requestItem(with, "data-wf")
	item["params"] = s(`{"base": "1"}`)
	e.put(dynamodb.TableWorkflowRequest, item)
	e.process(e.processor("p"), e.records(dynamodb.TableWorkflowRequest))

	req, err := e.st.GetRequest(testbin.Context(t), without, "data-wf")
	if err != nil || req.Outcome.Result != state.OutcomeRejected || !strings.Contains(req.Outcome.Reason, `param "base" is required`) {
		t.Errorf("a request without its required param: %+v, %v; want rejected naming it", req.Outcome, err)
	}
	if _, err := e.st.GetWorkflow(testbin.Context(t), state.WorkflowExecIDForRequest("data-wf", without)); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refused request wrote its execution: %v", err)
	}
	execID := state.WorkflowExecIDForRequest("data-wf", with)
	wf, err := e.st.GetWorkflow(testbin.Context(t), execID)
	if err != nil || wf.Params != `{"base":"1"}` {
		t.Fatalf("the execution's params: %+v, %v; want base=1", wf, err)
	}

	now := time.Now()
	a, b := state.ActivityExecIDFor(execID, "a"), state.ActivityExecIDFor(execID, "b")
	e.seedEvent(a, "RUNNING", now, "", nil)
	e.seedEvent(a, "HEARTBEAT", now.Add(time.Second), "", map[string]types.AttributeValue{"progress": s(`{"done": 1}`)})
	done := e.seedEvent(a, "COMPLETED", now.Add(2*time.Second), "", map[string]types.AttributeValue{"output": s(`{"n":41}`)})
	e.seedEvent(b, "RUNNING", now, "", nil)
	badOutput := e.seedEvent(b, "COMPLETED", now.Add(time.Second), "", map[string]types.AttributeValue{"output": s(`[1, 2]`)})
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))

	if o := e.outcome(done); o.Result != state.OutcomeApplied {
		t.Fatalf("COMPLETED with an output: %+v", o)
	}
	got := e.activity(execID, "a")
	if got.State != state.Completed || got.Output != `{"n":41}` || got.Progress != `{"done": 1}` || got.ProgressTime.IsZero() {
		t.Errorf("a: %s, output %q, progress %q at %v; want COMPLETED with both", got.State, got.Output, got.Progress, got.ProgressTime)
	}
	if o := e.outcome(badOutput); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "not a JSON object") {
		t.Errorf("COMPLETED with a list for output: %+v; want rejected", o)
	}
	if got := e.activity(execID, "b"); got.State != state.Running || got.Output != "" {
		t.Errorf("b: %s, output %q; want still RUNNING, no output", got.State, got.Output)
	}
}

const withTypedParams = `
name: typed-wf
params:
  base: {type: int}
  region: {enum: [eu, us]}
activities:
  a: {command: ["sh", "-c", "echo $(( {{ params.base }} + 1 ))"]}
`

// TestSimpleAPIRefusesABadTypedParam: a request whose param is not of its
// declared type (the injection of a shell command into an int) is
// rejected with an outcome naming the param, the value and the rule, and
// starts nothing; the same request with an int starts.
func TestSimpleAPIRefusesABadTypedParam(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.register(withTypedParams)

	bad := "typed-wf::" + uuid.NewString()
	good := "typed-wf::" + uuid.NewString()
	item := requestItem(bad, "typed-wf")
	item["params"] = s(`{"base": "2 )); echo INJECTED; echo $(( 3", "region": "mars"}`)
	e.put(dynamodb.TableWorkflowRequest, item)
	item = requestItem(good, "typed-wf")
	item["params"] = s(`{"base": 2, "region": "eu"}`)
	e.put(dynamodb.TableWorkflowRequest, item)
	e.process(e.processor("p"), e.records(dynamodb.TableWorkflowRequest))

	req, err := e.st.GetRequest(testbin.Context(t), bad, "typed-wf")
	if err != nil || req.Outcome.Result != state.OutcomeRejected {
		t.Fatalf("a request with a bad int: %+v, %v; want rejected", req.Outcome, err)
	}
	for _, want := range []string{`param "base": "2 )); echo INJECTED; echo $(( 3" is not an int`, `param "region": "mars" is not one of "eu", "us"`} {
		if !strings.Contains(req.Outcome.Reason, want) {
			t.Errorf("the outcome's reason %q lacks %q", req.Outcome.Reason, want)
		}
	}
	if _, err := e.st.GetWorkflow(testbin.Context(t), state.WorkflowExecIDForRequest("typed-wf", bad)); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refused request wrote its execution: %v", err)
	}
	wf, err := e.st.GetWorkflow(testbin.Context(t), state.WorkflowExecIDForRequest("typed-wf", good))
	if err != nil || wf.Params != `{"base":"2","region":"eu"}` {
		t.Errorf("the good request's execution: %+v, %v; want started with base=2", wf, err)
	}
}
