package simpleapi_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/simpleapi"
	simplelambda "github.com/whimbrel/whimbrel/simpleapi/lambda"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// These tests play a foreign client that follows the base contract to the
// letter: it writes raw items with the SDK, as `aws dynamodb put-item`
// would, with a whole-second `when` list (the contract's `date` recipe), no
// when_epoch, no workflow_exec_id, and none of Whimbrel's additions.

// eight is a workflow of eight activities that wait on nothing.
const eight = `
name: eight
activities:
  a1: {command: ["true"]}
  a2: {command: ["true"]}
  a3: {command: ["true"]}
  a4: {command: ["true"]}
  a5: {command: ["true"]}
  a6: {command: ["true"]}
  a7: {command: ["true"]}
  a8: {command: ["true"]}
`

// beating is a workflow whose definition turns heartbeats on.
const beating = `
name: beating
defaults:
  heartbeat_interval: 10s
  heartbeat_timeout: 40s
activities:
  a: {command: ["true"]}
`

func (e *env) register(src string) *definition.Workflow {
	e.t.Helper()
	def, err := definition.Parse("def.yaml", []byte(src))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.Register(testbin.Context(e.t), &state.WorkflowLambda{WorkflowName: def.Name, Definition: def.JSON(), Registered: time.Now()}); err != nil {
		e.t.Fatal(err)
	}
	return def
}

// seedWhen is the base contract's `when`: [year, month, day, hour, minute, second],
// whole seconds, and nothing else.
func seedWhen(t time.Time) types.AttributeValue {
	t = t.UTC()
	var l []types.AttributeValue
	for _, v := range []int{t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()} {
		l = append(l, n(strconv.Itoa(v)))
	}
	return &types.AttributeValueMemberL{Value: l}
}

// seedRequest writes a workflow_request as the base contract shapes it.
func (e *env) seedRequest(name string) string {
	e.t.Helper()
	id := name + "::" + uuid.NewString()
	e.put(dynamodb.TableWorkflowRequest, map[string]types.AttributeValue{"workflow_request_id": s(id), "workflow_name": s(name),
		"when": seedWhen(time.Now()), "source": s("seed client")})
	return state.WorkflowExecIDForRequest(name, id)
}

// seedEvent writes an activity_event as the base contract shapes it; uuid is the
// event ID's second half (empty: a random one).
func (e *env) seedEvent(actID, transition string, at time.Time, id string, extra map[string]types.AttributeValue) string {
	e.t.Helper()
	item := seedEventItem(actID, transition, at, id)
	for k, v := range extra {
		item[k] = v
	}
	e.put(dynamodb.TableActivityEvent, item)
	return item["activity_event_id"].(*types.AttributeValueMemberS).Value
}

func seedEventItem(actID, transition string, at time.Time, id string) map[string]types.AttributeValue {
	if id == "" {
		id = uuid.NewString()
	}
	return map[string]types.AttributeValue{"activity_event_id": s(actID + "::" + id), "activity_exec_id": s(actID),
		"when": seedWhen(at), "source": s("seed client"), "transition": s(transition)}
}

// eventually waits (bounded) until ok holds.
func (e *env) eventually(what string, ok func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			e.t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) decided(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		e.eventually("event "+id+" decided", func() bool { return e.outcome(id).Processed() })
	}
}

// rawActivity reads an activity item's attributes as they are stored.
func (e *env) rawActivity(execID, name string) map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.client.GetItem(testbin.Context(e.t), &awsdynamodb.GetItemInput{TableName: aws.String(e.st.Prefix() + dynamodb.TableActivityExec),
		Key:            map[string]types.AttributeValue{"activity_exec_id": s(state.ActivityExecIDFor(execID, name)), "workflow_exec_id": s(execID)},
		ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		e.t.Fatalf("get activity %s: %v", name, err)
	}
	return out.Item
}

func epochOf(it map[string]types.AttributeValue, name string) float64 {
	v, ok := it[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	f, _ := strconv.ParseFloat(v.Value, 64)
	return f
}

// TestSeedClientSameSecondEventsAllComplete: eight short activities, each
// with RUNNING and COMPLETED written in the same second, COMPLETED's ID
// sorting before RUNNING's, half of them written COMPLETED first (as two
// stream shards may deliver them). Every activity completes: RUNNING
// takes effect before COMPLETED whatever the IDs and the arrival.
func TestSeedClientSameSecondEventsAllComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	stop := e.poll("p")
	defer stop()
	execID := e.seedRequest(def.Name)
	e.waitState(execID, state.WorkflowRunning)

	now := time.Now()
	var ids []string
	for i, name := range def.Names() {
		actID := state.ActivityExecIDFor(execID, name)
		running := func() string { return e.seedEvent(actID, "RUNNING", now, "ffffffff-"+uuid.NewString()[9:], nil) }
		completed := func() string { return e.seedEvent(actID, "COMPLETED", now, "00000000-"+uuid.NewString()[9:], nil) }
		if i%2 == 0 {
			ids = append(ids, running(), completed())
		} else {
			c := completed()
			ids = append(ids, running(), c)
		}
	}
	e.waitState(execID, state.WorkflowCompleted)
	e.decided(ids...)
	for _, id := range ids {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: %+v, want applied", id, o)
		}
	}
	for _, name := range def.Names() {
		if a := e.activity(execID, name); a.State != state.Completed || a.Attempt != 1 {
			t.Errorf("%s: %s attempt %d, want COMPLETED at the first attempt", name, a.State, a.Attempt)
		}
	}
}

// TestSeedClientFutureDatedEventIsRefused: a HEARTBEAT dated an hour ahead
// (a local time written as UTC) is rejected, saying why, and moves
// nothing; the correct events after it take effect.
func TestSeedClientFutureDatedEventIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(beating)
	stop := e.poll("p")
	defer stop()
	execID := e.seedRequest(def.Name)
	e.waitState(execID, state.WorkflowRunning)
	actID := state.ActivityExecIDFor(execID, "a")

	now := time.Now()
	running := e.seedEvent(actID, "RUNNING", now, "", nil)
	ahead := e.seedEvent(actID, "HEARTBEAT", now.Add(time.Hour), "", nil)
	e.decided(running, ahead)
	if o := e.outcome(ahead); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "ahead") || !strings.Contains(o.Reason, "UTC") {
		t.Errorf("future heartbeat: %+v, want rejected as dated ahead", o)
	}
	if hb := epochOf(e.rawActivity(execID, "a"), "heartbeat_time_epoch"); hb > float64(time.Now().Unix()+1) {
		t.Errorf("heartbeat_time_epoch %v is in the future", hb)
	}
	beat := e.seedEvent(actID, "HEARTBEAT", now.Add(time.Second), "", nil)
	completed := e.seedEvent(actID, "COMPLETED", now.Add(time.Second), "", nil)
	e.waitState(execID, state.WorkflowCompleted)
	e.decided(beat, completed)
	for _, id := range []string{running, beat, completed} {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: %+v, want applied", id, o)
		}
	}
}

// TestSeedClientCancel: the contract's CANCEL word cancels an activity that is
// not running (CANCELLED) and one that is (CANCELLED_RUNNING).
func TestSeedClientCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ids := []string{
		e.seedEvent(state.ActivityExecIDFor(execID, "a1"), "CANCEL", now, "", nil),
		e.seedEvent(state.ActivityExecIDFor(execID, "a2"), "RUNNING", now, "", nil),
		e.seedEvent(state.ActivityExecIDFor(execID, "a2"), "CANCEL", now.Add(time.Second), "", nil),
	}
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	for _, id := range ids {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: %+v, want applied", id, o)
		}
	}
	if a := e.activity(execID, "a1"); a.State != state.Cancelled {
		t.Errorf("a1 is %s, want CANCELLED", a.State)
	}
	if a := e.activity(execID, "a2"); a.State != state.CancelledRunning {
		t.Errorf("a2 is %s, want CANCELLED_RUNNING", a.State)
	}
}

// TestSeedClientManualEventIsIgnored: the contract's manual marks a change the
// Full Logic API made itself; the processor records that it ignored it.
func TestSeedClientManualEventIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := e.seedEvent(state.ActivityExecIDFor(execID, "a"), "RUNNING", time.Now(), "", map[string]types.AttributeValue{"manual": &types.AttributeValueMemberBOOL{Value: true}})
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if o := e.outcome(id); o.Result != state.OutcomeIgnored || !strings.Contains(o.Reason, "manual") {
		t.Errorf("manual event: %+v, want ignored", o)
	}
	if a := e.activity(execID, "a"); a.State != state.Ready || a.Attempt != 0 {
		t.Errorf("a manual event was applied: %+v", a)
	}
}

// TestSeedClientHeartbeatFields: heartbeat_time_epoch stays negative while
// heartbeats are off, and a heartbeat then is rejected; when the
// definition turns them on, the claim made by a RUNNING event takes its
// settings and writes the first heartbeat.
func TestSeedClientHeartbeatFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	quiet, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	beats, _, err := workflow.Start(testbin.Context(t), e.st, e.register(beating), workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	quietRunning := e.seedEvent(state.ActivityExecIDFor(quiet, "a"), "RUNNING", now, "", nil)
	quietBeat := e.seedEvent(state.ActivityExecIDFor(quiet, "a"), "HEARTBEAT", now.Add(time.Second), "", nil)
	beatsRunning := e.seedEvent(state.ActivityExecIDFor(beats, "a"), "RUNNING", now, "", nil)
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))

	if o := e.outcome(quietRunning); o.Result != state.OutcomeApplied {
		t.Fatalf("RUNNING: %+v", o)
	}
	q := e.rawActivity(quiet, "a")
	if b, ok := q["heartbeat_enabled"].(*types.AttributeValueMemberBOOL); !ok || b.Value {
		t.Errorf("heartbeat_enabled %v, want false", q["heartbeat_enabled"])
	}
	if hb := epochOf(q, "heartbeat_time_epoch"); hb >= 0 {
		t.Errorf("heartbeats off, yet heartbeat_time_epoch is %v: the contract wants it negative", hb)
	}
	if o := e.outcome(quietBeat); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "heartbeats are off") {
		t.Errorf("a heartbeat while heartbeats are off: %+v, want rejected", o)
	}

	if o := e.outcome(beatsRunning); o.Result != state.OutcomeApplied {
		t.Fatalf("RUNNING: %+v", o)
	}
	b := e.activity(beats, "a")
	if !b.HeartbeatEnabled || b.HeartbeatInterval != 10*time.Second || b.HeartbeatTimeout != 40*time.Second {
		t.Errorf("claim by event: enabled %v interval %s timeout %s, want the definition's (true, 10s, 40s)", b.HeartbeatEnabled, b.HeartbeatInterval, b.HeartbeatTimeout)
	}
	if raw := e.rawActivity(beats, "a"); epochOf(raw, "heartbeat_time_epoch") <= 0 || b.HeartbeatTime.Before(b.StartTime) {
		t.Errorf("heartbeat_time_epoch %v, start %s: want the first heartbeat written at the claim", raw["heartbeat_time_epoch"], b.StartTime)
	}
}

// TestStatusShowsEveryRejectedSeedEvent: whimbrel status lists the
// rejected and the malformed events of a seed client, which carry no
// when_epoch, including those that never moved the activity.
func TestStatusShowsEveryRejectedSeedEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a")
	now := time.Now()
	running := e.seedEvent(actID, "RUNNING", now, "", nil)
	queued := e.seedEvent(actID, "QUEUED", now.Add(time.Second), "", nil) // RUNNING is past QUEUED
	ahead := e.seedEvent(actID, "COMPLETED", now.Add(2*time.Hour), "", nil)
	bad := e.seedEvent(actID, "DONE", now, "", nil)
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if o := e.outcome(running); o.Result != state.OutcomeApplied {
		t.Fatalf("RUNNING: %+v", o)
	}

	st, err := inspect.Load(testbin.Context(t), e.st, execID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := st.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"rejected event QUEUED (" + queued + "): the activity is already RUNNING",
		"rejected event COMPLETED (" + ahead + "): its when",
		"rejected event DONE (" + bad + "): malformed",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// TestOneIllegalEventHoldsUpNoOtherActivity: an event that cannot take
// effect yet waits for its order window without delaying the events of
// other activities behind it on the stream.
func TestOneIllegalEventHoldsUpNoOtherActivity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := e.poll("p")
	defer stop()
	now := time.Now()
	stuck := e.seedEvent(state.ActivityExecIDFor(execID, "a1"), "COMPLETED", now, "", nil) // a1 never runs
	written := time.Now()
	other := []string{
		e.seedEvent(state.ActivityExecIDFor(execID, "a2"), "RUNNING", now, "", nil),
		e.seedEvent(state.ActivityExecIDFor(execID, "a2"), "COMPLETED", now, "", nil),
	}
	e.decided(other...)
	// a2's events did not wait for a1's to be decided (at the end of
	// its order window, 5 s).
	if o := e.outcome(stuck); o.Processed() {
		t.Errorf("a2's events were decided only after a1's (%+v), %s after they were written: held up", o, time.Since(written))
	}
	if a := e.activity(execID, "a2"); a.State != state.Completed {
		t.Errorf("a2 is %s, want COMPLETED", a.State)
	}
	e.decided(stuck)
	if o := e.outcome(stuck); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "READY") {
		t.Errorf("a1's COMPLETED: %+v, want rejected once its window passed", o)
	}
}

// TestTwoPollersStartEachRequestOnceAndApplyEachEventOnce: two pollers of
// different names read every record; seed clients write requests and,
// for each activity, RUNNING, HEARTBEAT and COMPLETED in one second, all
// at once (b's before a completed). Every request is started once (one
// "started" line), every event applied once.
func TestTwoPollersStartEachRequestOnceAndApplyEachEventOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const requests = 6
	stop1 := e.pollAs("one", "one")
	defer stop1()
	stop2 := e.pollAs("two", "two")
	defer stop2()

	var execs []string
	for range requests {
		execs = append(execs, e.seedRequest(e.def.Name))
	}
	for _, id := range execs {
		e.waitState(id, state.WorkflowRunning)
	}
	var mu sync.Mutex
	var ids []string
	transition := map[string]string{}
	var wg sync.WaitGroup
	for _, execID := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := time.Now()
			for _, name := range []string{"a", "b"} {
				actID := state.ActivityExecIDFor(execID, name)
				for _, tr := range []string{"RUNNING", "HEARTBEAT", "COMPLETED"} {
					id := e.seedEvent(actID, tr, now, "", nil)
					mu.Lock()
					ids = append(ids, id)
					transition[id] = tr
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, id := range execs {
		e.waitState(id, state.WorkflowCompleted)
	}
	e.decided(ids...)
	if got := e.logs.count("started: "); got != requests {
		t.Errorf("%d \"started\" lines, want %d", got, requests)
	}
	for _, id := range ids {
		if transition[id] == "HEARTBEAT" {
			continue // heartbeats are off in this workflow: decided, and rejected
		}
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("%s event %s: %+v, want applied", transition[id], id, o)
		}
		if n := e.logs.count("event applied: activity_event_id=" + id + " "); n != 1 {
			t.Errorf("%s event %s applied %d times", transition[id], id, n)
		}
	}
	for _, execID := range execs {
		for _, name := range []string{"a", "b"} {
			if a := e.activity(execID, name); a.State != state.Completed || a.Attempt != 1 {
				t.Errorf("%s %s: %s attempt %d, want COMPLETED claimed once", execID, name, a.State, a.Attempt)
			}
		}
	}
}

// TestLambdaSetsAsideAWaitingEvent: in one Lambda batch, a COMPLETED that
// comes before its RUNNING (and a seed event with no when at all) is set
// aside while the records behind it go on, then applied within the
// invocation: no batch item failure, nothing held up.
func TestLambdaSetsAsideAWaitingEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a")
	completed := e.seedEvent(actID, "COMPLETED", time.Now(), "", nil)
	running := actID + "::" + uuid.NewString()
	e.put(dynamodb.TableActivityEvent, map[string]types.AttributeValue{"activity_event_id": s(running), "activity_exec_id": s(actID),
		"transition": s("RUNNING")}) // no when: the time it was written
	p := e.processorWithWindow("fn", simpleapi.DefaultOrderWindow)
	out, err := lambda.NewHandler(simplelambda.New(p).Handle).Invoke(testbin.Context(t), lambdaEvent(t, e.records(dynamodb.TableActivityEvent)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "itemIdentifier") {
		t.Errorf("response %s: want no batch item failures", out)
	}
	for _, id := range []string{running, completed} {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: %+v, want applied", id, o)
		}
	}
	if a := e.activity(execID, "a"); a.State != state.Completed || a.StartTime.IsZero() {
		t.Errorf("a: %s started %s, want COMPLETED with a start time", a.State, a.StartTime)
	}
}

// TestSeedClientRePutEventKeepsItsOutcome: a client that writes a decided
// event again (a retry of a put whose answer it lost) wipes its outcome;
// the processor decides it again, to the same outcome, and changes
// nothing.
func TestSeedClientRePutEventKeepsItsOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a")
	now := time.Now()
	running := seedEventItem(actID, "RUNNING", now, "")
	queued := seedEventItem(actID, "QUEUED", now.Add(time.Second), "") // past: rejected
	completed := seedEventItem(actID, "COMPLETED", now.Add(time.Second), "")
	for _, it := range []map[string]types.AttributeValue{running, queued, completed} {
		e.put(dynamodb.TableActivityEvent, it)
	}
	p := e.processor("p")
	e.process(p, e.records(dynamodb.TableActivityEvent))
	before := e.activity(execID, "a")
	if before.State != state.Completed {
		t.Fatalf("a is %s, want COMPLETED", before.State)
	}
	seen := len(e.records(dynamodb.TableActivityEvent))

	for _, it := range []map[string]types.AttributeValue{running, queued, completed} {
		e.put(dynamodb.TableActivityEvent, it)
	}
	recs := e.records(dynamodb.TableActivityEvent)[seen:]
	var modify int
	for _, r := range recs {
		if r.EventName == "MODIFY" && r.Dynamodb.NewImage["outcome"] == nil {
			modify++
		}
	}
	if modify != 3 {
		t.Fatalf("%d MODIFY records without an outcome, want 3", modify)
	}
	e.process(p, recs)
	for it, want := range map[*map[string]types.AttributeValue]string{&running: state.OutcomeApplied, &queued: state.OutcomeRejected, &completed: state.OutcomeApplied} {
		id := (*it)["activity_event_id"].(*types.AttributeValueMemberS).Value
		if o := e.outcome(id); o.Result != want {
			t.Errorf("re-put %s event: %+v, want %s again", (*it)["transition"].(*types.AttributeValueMemberS).Value, o, want)
		}
	}
	if after := e.activity(execID, "a"); after.State != state.Completed || after.Attempt != 1 || !after.EndTime.Equal(before.EndTime) {
		t.Errorf("the re-put changed the activity: %+v", after)
	}
}

// TestSeedClientEventFindsItsActivityByID: an event naming only its
// activity (no workflow_exec_id) is judged against that activity, found
// by the hash key of its table, whatever its state: a late FAILED for an
// activity that completed is rejected as such, by a processor that never
// saw the activity before.
func TestSeedClientEventFindsItsActivityByID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, e.def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a")
	now := time.Now()
	running := e.seedEvent(actID, "RUNNING", now, "", nil)
	completed := e.seedEvent(actID, "COMPLETED", now.Add(time.Second), "", nil)
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	for _, id := range []string{running, completed} {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Fatalf("event %s: %+v, want applied", id, o)
		}
	}
	seen := len(e.records(dynamodb.TableActivityEvent))
	late := e.seedEvent(actID, "FAILED", now.Add(2*time.Second), "", nil)
	e.process(e.processor("fresh"), e.records(dynamodb.TableActivityEvent)[seen:])
	if o := e.outcome(late); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "COMPLETED") {
		t.Errorf("a late FAILED for a COMPLETED activity: %+v, want rejected because the activity is COMPLETED", o)
	}
	if a := e.activity(execID, "a"); a.State != state.Completed {
		t.Errorf("a is %s, want COMPLETED", a.State)
	}
}
