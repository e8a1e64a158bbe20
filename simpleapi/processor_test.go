package simpleapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	simplelambda "github.com/whimbrel/whimbrel/simpleapi/lambda"
	"github.com/whimbrel/whimbrel/simpleapi/poller"
	"github.com/whimbrel/whimbrel/simpleapi/report"
	"github.com/whimbrel/whimbrel/simpleapi/stream"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

const simpleYAML = `
name: simple-wf
activities:
  a:
    command: ["true"]
  b:
    depends_on: [a]
    command: ["true"]
`

// env is one test's tables, with the workflow registered.
// store is a DynamoDB store with the inbox in its tables, as the commands
// open it.
type store struct {
	*dynamodb.Store
	*dynamoinbox.Inbox
}

func newStore(t *testing.T) *store {
	st := dynamotest.NewStore(t, dynamodb.Options{})
	return &store{st, dynamoinbox.New(st)}
}

type env struct {
	t       *testing.T
	st      *store
	client  *awsdynamodb.Client
	streams *dynamodbstreams.Client
	def     *definition.Workflow
	logs    *logBuffer // every processor's log lines
}

// logBuffer keeps log lines for a test to count.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, st: newStore(t), client: dynamotest.Client(t), streams: dynamotest.Streams(t), logs: &logBuffer{}}
	def, err := definition.Parse("simple.yaml", []byte(simpleYAML))
	if err != nil {
		t.Fatal(err)
	}
	e.def = def
	if err := e.st.Register(testbin.Context(t), &state.WorkflowLambda{WorkflowName: def.Name, Definition: def.JSON(), Registered: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return e
}

// processor returns a processor that rejects at once what it cannot apply
// yet: for tests that deliver records in a known order.
func (e *env) processor(name string) *simpleapi.Processor {
	return e.processorWithWindow(name, 0)
}

func (e *env) processorWithWindow(name string, window time.Duration) *simpleapi.Processor {
	return simpleapi.New(simpleapi.Config{Store: e.st, Name: name, OrderWindow: window,
		Logger: hclog.New(&hclog.LoggerOptions{Name: name, Level: hclog.Info, Output: testWriter{e.t, e.logs}})})
}

type testWriter struct {
	t    *testing.T
	logs *logBuffer
}

func (w testWriter) Write(b []byte) (int, error) {
	line := strings.TrimSpace(string(b))
	w.t.Log(line)
	if w.logs != nil {
		w.logs.mu.Lock()
		w.logs.lines = append(w.logs.lines, line)
		w.logs.mu.Unlock()
	}
	return len(b), nil
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// when writes a time the way a foreign client writes it: the contract's list
// and its epoch.
func when(item map[string]types.AttributeValue, t time.Time) {
	t = t.UTC()
	sec := float64(t.Second()) + float64(t.Nanosecond()/1e6)/1e3
	item["when"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{
		n(strconv.Itoa(t.Year())), n(strconv.Itoa(int(t.Month()))), n(strconv.Itoa(t.Day())),
		n(strconv.Itoa(t.Hour())), n(strconv.Itoa(t.Minute())), n(strconv.FormatFloat(sec, 'f', -1, 64))}}
	item["when_epoch"] = n(strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', -1, 64))
}

// put inserts an item with the SDK, as any client of the Simple Lambda API
// would, bypassing Whimbrel's store.
func (e *env) put(base string, item map[string]types.AttributeValue) {
	e.t.Helper()
	if _, err := e.client.PutItem(testbin.Context(e.t), &awsdynamodb.PutItemInput{TableName: aws.String(e.st.Prefix() + base), Item: item}); err != nil {
		e.t.Fatalf("put %s: %v", base, err)
	}
}

// request inserts a workflow_request and returns the execution it starts.
func (e *env) request(id string) string {
	e.t.Helper()
	e.put(dynamodb.TableWorkflowRequest, requestItem(id, e.def.Name))
	return state.WorkflowExecIDForRequest(e.def.Name, id)
}

// event inserts an activity_event.
func (e *env) event(execID, activity, transition string, at time.Time, extra map[string]types.AttributeValue) string {
	e.t.Helper()
	actID := state.ActivityExecIDFor(execID, activity)
	id := actID + "::" + uuid.NewString()
	item := map[string]types.AttributeValue{"activity_event_id": s(id), "activity_exec_id": s(actID),
		"workflow_exec_id": s(execID), "transition": s(transition), "source": s("aws-sdk test")}
	when(item, at)
	for k, v := range extra {
		item[k] = v
	}
	e.put(dynamodb.TableActivityEvent, item)
	return id
}

// records reads every record a table's stream holds now.
func (e *env) records(base string) []streamtypes.Record {
	e.t.Helper()
	arn, err := poller.StreamARN(testbin.Context(e.t), e.st.Store, base)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := e.streams.DescribeStream(testbin.Context(e.t), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []streamtypes.Record
	for _, sh := range d.StreamDescription.Shards {
		it, err := e.streams.GetShardIterator(testbin.Context(e.t), &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
			ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			e.t.Fatal(err)
		}
		iter := it.ShardIterator
		for iter != nil {
			r, err := e.streams.GetRecords(testbin.Context(e.t), &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				e.t.Fatal(err)
			}
			out = append(out, r.Records...)
			if len(r.Records) == 0 {
				break // an open shard: nothing more now
			}
			iter = r.NextShardIterator
		}
	}
	return out
}

// process applies records in the order given, as a poller does: one that
// waits for an earlier event is set aside and tried again after the rest,
// until every record is done (bounded).
func (e *env) process(p *simpleapi.Processor, recs []streamtypes.Record) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(recs) > 0 {
		var waiting []streamtypes.Record
		for _, r := range recs {
			err := stream.Process(testbin.Context(e.t), p, poller.RecordFromStream(r))
			var bad *simpleapi.MalformedError
			switch {
			case errors.As(err, &bad):
				// reported and skipped, as a poller does
			case simpleapi.IsTooEarly(err):
				waiting = append(waiting, r)
			case err != nil:
				e.t.Fatalf("process %s: %v", aws.ToString(r.EventID), err)
			}
		}
		recs = waiting
		if len(recs) > 0 {
			if time.Now().After(deadline) {
				e.t.Fatalf("%d records still wait", len(recs))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *env) activity(execID, name string) *state.ActivityExec {
	e.t.Helper()
	a, err := e.st.GetActivity(testbin.Context(e.t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(execID, name), WorkflowExecID: execID})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func (e *env) outcome(eventID string) state.Outcome {
	e.t.Helper()
	actID := eventID[:strings.LastIndex(eventID, "::")]
	ev, err := e.st.GetEvent(testbin.Context(e.t), eventID, actID)
	if err != nil && !errors.Is(err, state.ErrInvalidItem) { // a malformed event still has its outcome
		e.t.Fatal(err)
	}
	return ev.Outcome
}

func TestRequestDeliveredTwiceStartsOneExecution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID := e.request("simple-wf::" + uuid.NewString())
	recs := e.records(dynamodb.TableWorkflowRequest)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	// Delivered again and again, to two processors at once.
	var wg sync.WaitGroup
	for _, name := range []string{"p1", "p2"} {
		p := e.processor(name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				// The processor that lost the claim waits for the
				// start to finish, as a poller or Lambda retries.
				deadline := time.Now().Add(20 * time.Second)
				err := stream.Process(testbin.Context(t), p, poller.RecordFromStream(recs[0]))
				for simpleapi.IsTooEarly(err) && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					err = stream.Process(testbin.Context(t), p, poller.RecordFromStream(recs[0]))
				}
				if err != nil {
					t.Errorf("process: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	wfs, err := e.st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: e.def.Name})
	if err != nil || len(wfs) != 1 || wfs[0].WorkflowExecID != execID {
		t.Fatalf("executions %+v (%v), want exactly %s", wfs, err, execID)
	}
	wf, err := e.st.GetWorkflow(testbin.Context(t), execID)
	if err != nil || wf.State != state.WorkflowRunning || wf.Definition == "" {
		t.Errorf("workflow %+v, %v: want RUNNING with its definition", wf, err)
	}
	if a := e.activity(execID, "a"); a.State != state.Ready {
		t.Errorf("a is %s, want READY", a.State)
	}
	req, err := e.st.GetRequest(testbin.Context(t), wf.WorkflowRequestID, e.def.Name)
	if err != nil || req.Outcome.Result != state.OutcomeStarted || req.WorkflowExecID != execID {
		t.Errorf("request %+v, %v: want its outcome recorded", req, err)
	}
	// One processor started it, once: one log line, one start time.
	if got := e.logs.count("started: "); got != 1 {
		t.Errorf("%d processors logged \"started\", want 1", got)
	}
	startTime := wf.StartTime

	// A client writes the processed request again, wiping its outcome:
	// the MODIFY record decides it again, to the same outcome, and
	// nothing is started or rewritten.
	e.put(dynamodb.TableWorkflowRequest, requestItem(wf.WorkflowRequestID, e.def.Name))
	recs = e.records(dynamodb.TableWorkflowRequest)
	if last := recs[len(recs)-1]; last.EventName != streamtypes.OperationTypeModify {
		t.Fatalf("the re-put gave a %s record, want MODIFY", last.EventName)
	}
	e.process(e.processor("p3"), recs[len(recs)-1:])
	req, err = e.st.GetRequest(testbin.Context(t), wf.WorkflowRequestID, e.def.Name)
	if err != nil || req.Outcome.Result != state.OutcomeStarted {
		t.Errorf("re-put request %+v, %v: want its outcome (started) back", req, err)
	}
	if wf, _ := e.st.GetWorkflow(testbin.Context(t), execID); !wf.StartTime.Equal(startTime) {
		t.Errorf("start time %s rewritten, was %s", wf.StartTime, startTime)
	}
	if got := e.logs.count("started: "); got != 1 {
		t.Errorf("%d \"started\" lines after the re-put, want 1", got)
	}
}

func requestItem(id, name string) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{"workflow_request_id": s(id), "workflow_name": s(name), "source": s("aws-sdk test")}
	when(item, time.Now())
	return item
}

func TestRequestsNotStarted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	unknown := map[string]types.AttributeValue{"workflow_request_id": s("nobody::" + uuid.NewString()), "workflow_name": s("nobody")}
	when(unknown, time.Now())
	e.put(dynamodb.TableWorkflowRequest, unknown)
	manual := map[string]types.AttributeValue{"workflow_request_id": s("simple-wf::" + uuid.NewString()), "workflow_name": s("simple-wf"),
		"manual": &types.AttributeValueMemberBOOL{Value: true}}
	when(manual, time.Now())
	e.put(dynamodb.TableWorkflowRequest, manual)
	e.process(e.processor("p"), e.records(dynamodb.TableWorkflowRequest))

	r, err := e.st.GetRequest(testbin.Context(t), unknown["workflow_request_id"].(*types.AttributeValueMemberS).Value, "nobody")
	if err != nil || r.Outcome.Result != state.OutcomeRejected || !strings.Contains(r.Outcome.Reason, "whimbrel register") {
		t.Errorf("request of an unregistered workflow: %+v, %v; want it rejected, saying what to do", r, err)
	}
	r, err = e.st.GetRequest(testbin.Context(t), manual["workflow_request_id"].(*types.AttributeValueMemberS).Value, "simple-wf")
	if err != nil || r.Outcome.Result != state.OutcomeIgnored {
		t.Errorf("manual request: %+v, %v; want it ignored", r, err)
	}
	if wfs, _ := e.st.Workflows(testbin.Context(t), state.WorkflowQuery{}); len(wfs) != 0 {
		t.Errorf("%d executions started, want none", len(wfs))
	}
}

func TestIllegalTransitionIsRejectedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := e.activity(execID, "a")
	id := e.event(execID, "a", "COMPLETED", time.Now(), nil) // READY cannot move to COMPLETED
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))

	after := e.activity(execID, "a")
	if after.State != state.Ready || after.Owner != before.Owner || after.Attempt != before.Attempt || !after.StateTime.Equal(before.StateTime) ||
		after.Reason != before.Reason || after.ExitCode != nil {
		t.Errorf("the activity changed: before %+v\nafter %+v", before, after)
	}
	if o := e.outcome(id); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "READY") || o.At.IsZero() {
		t.Errorf("outcome %+v: want rejected, naming the state", o)
	}
	if wf, _ := e.st.GetWorkflow(testbin.Context(t), execID); wf.State != state.WorkflowRunning {
		t.Errorf("workflow is %s, want RUNNING", wf.State)
	}
	// whimbrel status says so.
	st, err := inspect.Load(testbin.Context(t), e.st, execID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := st.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "rejected event COMPLETED ("+id+"): activity in state READY cannot move to COMPLETED") {
		t.Errorf("status does not show the rejected event:\n%s", out.String())
	}
}

// TestEventsTakeEffectInStateMachineOrder delivers an activity's events
// newest first: they still take effect RUNNING, HEARTBEAT, COMPLETED, and
// each gets its outcome, the heartbeat too.
func TestEventsTakeEffectInStateMachineOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	owner := map[string]types.AttributeValue{"owner": s("wrapper-1")}
	running := e.event(execID, "a", "RUNNING", t0, map[string]types.AttributeValue{"owner": s("wrapper-1"), "host": s("h1"), "heartbeat_enabled": &types.AttributeValueMemberBOOL{Value: true}})
	beat := e.event(execID, "a", "HEARTBEAT", t0.Add(time.Second), owner)
	completed := e.event(execID, "a", "COMPLETED", t0.Add(2*time.Second), map[string]types.AttributeValue{"owner": s("wrapper-1"), "exit_code": n("0")})
	recs := e.records(dynamodb.TableActivityEvent)
	slices.Reverse(recs)
	p := e.processorWithWindow("p", simpleapi.DefaultOrderWindow)
	e.process(p, recs)

	a := e.activity(execID, "a")
	if a.State != state.Completed || a.Owner != "wrapper-1" || a.Host != "h1" || a.Attempt != 1 || a.ExitCode == nil || *a.ExitCode != 0 ||
		!a.HeartbeatTime.Equal(t0.Add(time.Second)) {
		t.Errorf("a: %+v, want COMPLETED by wrapper-1 after its heartbeat", a)
	}
	for _, id := range []string{running, beat, completed} {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: outcome %+v, want applied", id, o)
		}
	}
	// The processor advanced the workflow.
	if b := e.activity(execID, "b"); b.State != state.Ready {
		t.Errorf("b is %s, want READY", b.State)
	}
	// Delivered again, nothing changes.
	e.process(p, recs)
	if again := e.activity(execID, "a"); again.EventCursor != a.EventCursor || again.Attempt != 1 {
		t.Errorf("a replay changed a: %+v", again)
	}
}

// TestPollerSkipsMalformedAndResumes runs the poller: a malformed record is
// reported and skipped without holding up the records behind it, and a
// poller started again resumes where the last one stopped.
func TestPollerSkipsMalformedAndResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.event(state.WorkflowExecIDForRequest("simple-wf", "simple-wf::"+uuid.NewString()), "a", "DONE", time.Now(), nil)
	badReq := map[string]types.AttributeValue{"workflow_request_id": s("simple-wf::" + uuid.NewString()), "workflow_name": s("simple-wf"),
		"manual": s("no")}
	e.put(dynamodb.TableWorkflowRequest, badReq)
	first := e.request("simple-wf::" + uuid.NewString())

	stop := e.poll("poller-1")
	e.waitState(first, state.WorkflowRunning)
	stop()
	if o := e.outcome(bad); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "malformed") || !strings.Contains(o.Reason, "transition") {
		t.Errorf("malformed event: outcome %+v, want rejected as malformed, naming the attribute", o)
	}
	r, err := e.st.GetRequest(testbin.Context(t), badReq["workflow_request_id"].(*types.AttributeValueMemberS).Value, "simple-wf")
	if err != nil && !errors.Is(err, state.ErrInvalidItem) || r.Outcome.Result != state.OutcomeRejected || !strings.Contains(r.Outcome.Reason, "manual") {
		t.Errorf("malformed request: %+v, %v", r, err)
	}

	// While no poller runs, a request waits; the next poller starts it,
	// and starts nothing twice.
	second := e.request("simple-wf::" + uuid.NewString())
	stop = e.poll("poller-2")
	e.waitState(second, state.WorkflowRunning)
	stop()
	wfs, err := e.st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: "simple-wf"})
	if err != nil || len(wfs) != 2 {
		t.Errorf("executions %d (%v), want 2", len(wfs), err)
	}
}

func (e *env) poll(name string) (stop func()) {
	e.t.Helper()
	return e.pollAs("poller", name)
}

// pollAs runs a poller whose positions are kept under positions, with a
// processor of the given name.
func (e *env) pollAs(positions, name string) (stop func()) {
	e.t.Helper()
	var arns []string
	for _, base := range []string{dynamodb.TableWorkflowRequest, dynamodb.TableActivityEvent} {
		arn, err := poller.StreamARN(testbin.Context(e.t), e.st.Store, base)
		if err != nil {
			e.t.Fatal(err)
		}
		arns = append(arns, arn)
	}
	p, err := poller.New(poller.Config{Name: positions, Processor: stream.Processor{P: e.processorWithWindow(name, simpleapi.DefaultOrderWindow)},
		Streams: e.streams, Positions: poller.StorePositions{Store: e.st.Store}, StreamARNs: arns, PollInterval: 50 * time.Millisecond, Discovery: time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "poll", Level: hclog.Debug, Output: testWriter{e.t, nil}})})
	if err != nil {
		e.t.Fatal(err)
	}
	c, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(c) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("poller: %v", err)
		}
	}
}

func (e *env) waitState(execID string, want state.WorkflowState) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		wf, err := e.st.GetWorkflow(testbin.Context(e.t), execID)
		if err == nil && wf.State == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("workflow %s: %+v, %v; want %s\n%s", execID, wf, err, want, e.snapshot(execID))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLambdaHandlerDoesWhatThePollerDoes plays one story twice: once
// through the poller, once through the Lambda handler invoked with the
// stream's records as Lambda delivers them (JSON), and compares the
// results.
func TestLambdaHandlerDoesWhatThePollerDoes(t *testing.T) {
	t.Parallel()
	reqID := "simple-wf::" + uuid.NewString()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	story := func(e *env, deliver func(base string)) string {
		execID := e.request(reqID)
		deliver(dynamodb.TableWorkflowRequest)
		e.waitState(execID, state.WorkflowRunning)
		var ids []string
		for i, ev := range []struct{ act, transition, exit string }{
			{"a", "RUNNING", ""}, {"a", "COMPLETED", "0"}, {"b", "RUNNING", ""}, {"b", "FAILED", "3"},
			{"b", "COMPLETED", "0"}, {"b", "TIMED_OUT", ""}, // FAILED is final: rejected
		} {
			extra := map[string]types.AttributeValue{"owner": s("w-" + ev.act)}
			if ev.exit != "" {
				extra["exit_code"] = n(ev.exit)
			}
			ids = append(ids, e.event(execID, ev.act, ev.transition, t0.Add(time.Duration(i)*time.Second), extra))
		}
		// A malformed event among them.
		ids = append(ids, e.event(execID, "b", "", t0.Add(10*time.Second), nil))
		deliver(dynamodb.TableActivityEvent)
		e.waitState(execID, state.WorkflowFailed)
		for _, id := range ids {
			deadline := time.Now().Add(30 * time.Second)
			for !e.outcome(id).Processed() {
				if time.Now().After(deadline) {
					t.Fatalf("event %s was not decided", id)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return execID
	}

	viaPoller := newEnv(t)
	stop := viaPoller.poll("poller")
	id := story(viaPoller, func(string) {})
	stop()

	viaLambda := newEnv(t)
	p := viaLambda.processorWithWindow("fn", simpleapi.DefaultOrderWindow)
	handler := lambda.NewHandler(simplelambda.New(p).Handle)
	delivered := map[string]int{}
	story(viaLambda, func(base string) {
		recs := viaLambda.records(base)[delivered[base]:]
		delivered[base] += len(recs)
		payload := lambdaEvent(t, recs)
		out, err := handler.Invoke(testbin.Context(t), payload)
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		var resp struct {
			BatchItemFailures []any `json:"batchItemFailures"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("response %s (%v): want no batch item failures", out, err)
		}
	})

	a, b := viaPoller.snapshot(id), viaLambda.snapshot(id)
	if a != b {
		t.Errorf("poller:\n%s\nlambda:\n%s", a, b)
	}
	for _, want := range []string{"workflow FAILED", "a COMPLETED owner=w-a exit=0", "b FAILED owner=w-b exit=3",
		"b COMPLETED: rejected", "b TIMED_OUT: rejected", "b : rejected"} {
		if !strings.Contains(a, want) {
			t.Errorf("poller's result lacks %q:\n%s", want, a)
		}
	}
}

// snapshot writes what a story left, without times.
func (e *env) snapshot(execID string) string {
	e.t.Helper()
	var lines []string
	wf, err := e.st.GetWorkflow(testbin.Context(e.t), execID)
	if err != nil {
		e.t.Fatal(err)
	}
	lines = append(lines, "workflow "+string(wf.State))
	acts, err := e.st.Activities(testbin.Context(e.t), execID)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, a := range acts {
		name := a.ActivityName
		exit := "-"
		if a.ExitCode != nil {
			exit = strconv.Itoa(*a.ExitCode)
		}
		lines = append(lines, fmt.Sprintf("%s %s owner=%s exit=%s attempt=%d", name, a.State, a.Owner, exit, a.Attempt))
		out, err := e.client.Scan(testbin.Context(e.t), &awsdynamodb.ScanInput{TableName: aws.String(e.st.Prefix() + dynamodb.TableActivityEvent)})
		if err != nil {
			e.t.Fatal(err)
		}
		var evs []string
		for _, it := range out.Items {
			if it["activity_exec_id"].(*types.AttributeValueMemberS).Value != a.ActivityExecID {
				continue
			}
			tr, _ := it["transition"].(*types.AttributeValueMemberS)
			o, _ := it["outcome"].(*types.AttributeValueMemberS)
			ep, _ := it["when_epoch"].(*types.AttributeValueMemberN)
			epoch := "-" // a seed client's event, not decided yet
			if ep != nil {
				epoch = ep.Value
			}
			line := epoch + " " + name + " "
			if tr != nil {
				line += tr.Value
			}
			line += ": "
			if o != nil {
				line += o.Value
			}
			evs = append(evs, line)
		}
		slices.Sort(evs)
		for _, l := range evs {
			lines = append(lines, l[strings.Index(l, " ")+1:])
		}
	}
	return strings.Join(lines, "\n")
}

// lambdaEvent writes stream records as the JSON Lambda delivers.
func lambdaEvent(t *testing.T, recs []streamtypes.Record) []byte {
	type change struct {
		Keys           map[string]any `json:"Keys"`
		NewImage       map[string]any `json:"NewImage,omitempty"`
		SequenceNumber string         `json:"SequenceNumber"`
		SizeBytes      int64          `json:"SizeBytes"`
		StreamViewType string         `json:"StreamViewType"`
	}
	type record struct {
		EventID        string `json:"eventID"`
		EventName      string `json:"eventName"`
		EventSource    string `json:"eventSource"`
		EventVersion   string `json:"eventVersion"`
		AWSRegion      string `json:"awsRegion"`
		Change         change `json:"dynamodb"`
		EventSourceARN string `json:"eventSourceARN"`
	}
	var out struct {
		Records []record `json:"Records"`
	}
	for _, r := range recs {
		out.Records = append(out.Records, record{
			EventID: aws.ToString(r.EventID), EventName: string(r.EventName), EventSource: "aws:dynamodb", EventVersion: "1.1",
			AWSRegion: dynamotest.Region, EventSourceARN: "arn:aws:dynamodb:us-east-1:000000000000:table/x/stream/1",
			Change: change{Keys: jsonItem(r.Dynamodb.Keys), NewImage: jsonItem(r.Dynamodb.NewImage),
				SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber), SizeBytes: aws.ToInt64(r.Dynamodb.SizeBytes), StreamViewType: "NEW_IMAGE"},
		})
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonItem(m map[string]streamtypes.AttributeValue) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = jsonValue(v)
	}
	return out
}

func jsonValue(v streamtypes.AttributeValue) any {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *streamtypes.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *streamtypes.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *streamtypes.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *streamtypes.AttributeValueMemberL:
		var l []any
		for _, e := range v.Value {
			l = append(l, jsonValue(e))
		}
		return map[string]any{"L": l}
	case *streamtypes.AttributeValueMemberM:
		return map[string]any{"M": jsonItem(v.Value)}
	}
	return map[string]any{"NULL": true}
}

// TestClaimWithdrawnWhenNoProcessorAnswers: a wrapper that gives up on its
// claim withdraws it, so a processor arriving later does not make the
// activity RUNNING with nobody running it.
func TestClaimWithdrawnWhenNoProcessorAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(execID, "a"), WorkflowExecID: execID}
	c := &report.Client{Store: e.st, Source: "test", ClaimWait: 300 * time.Millisecond}
	_, err = c.UpdateActivity(testbin.Context(t), key, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: storetest.Claim("late-wrapper")})
	if !errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "whimbrel-poller") {
		t.Fatalf("claim with no processor: %v, want a refusal that says what to run", err)
	}
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if a := e.activity(execID, "a"); a.State != state.Ready || a.Owner != "" {
		t.Errorf("a withdrawn claim took effect: %+v", a)
	}
}
