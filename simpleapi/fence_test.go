package simpleapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

func boolAV(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

// TestOnlyTheHolderMovesAHeldActivity: once a wrapper has claimed an
// activity under its owner token, heartbeats and ends from anyone else,
// with no owner or another one, are rejected, saying why, and change
// nothing; the holder's own end then takes effect. A base-contract client,
// which names no owners, still claims, heartbeats, completes and cancels
// its own activities.
func TestOnlyTheHolderMovesAHeldActivity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held, base, cancelled := state.ActivityExecIDFor(execID, "a1"), state.ActivityExecIDFor(execID, "a2"), state.ActivityExecIDFor(execID, "a3")
	now := time.Now()
	beating := map[string]types.AttributeValue{"heartbeat_enabled": boolAV(true)}
	claim := map[string]types.AttributeValue{"owner": s("wrapper-1"), "heartbeat_enabled": boolAV(true)}
	claims := []string{
		e.seedEvent(held, "RUNNING", now, "", claim),
		e.seedEvent(base, "RUNNING", now, "", beating),
		e.seedEvent(cancelled, "RUNNING", now, "", nil),
	}
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	for _, id := range claims {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Fatalf("claim %s: %+v, want applied", id, o)
		}
	}

	later := now.Add(time.Second)
	forged := map[string]string{
		"ownerless HEARTBEAT":    e.seedEvent(held, "HEARTBEAT", later, "", nil),
		"ownerless COMPLETED":    e.seedEvent(held, "COMPLETED", later, "", map[string]types.AttributeValue{"output": s(`{"forged": true}`)}),
		"ownerless FAILED":       e.seedEvent(held, "FAILED", later, "", nil),
		"ownerless TIMED_OUT":    e.seedEvent(held, "TIMED_OUT", later, "", nil),
		"ownerless CANCEL":       e.seedEvent(held, "CANCEL", later, "", nil),
		"another owner's end":    e.seedEvent(held, "COMPLETED", later, "", map[string]types.AttributeValue{"owner": s("wrapper-2")}),
		"an owner on a base one": e.seedEvent(base, "FAILED", later, "", map[string]types.AttributeValue{"owner": s("wrapper-2")}),
		"another owner's CANCEL": e.seedEvent(cancelled, "CANCEL", later, "", map[string]types.AttributeValue{"owner": s("wrapper-2")}),
	}
	baseOwn := []string{
		e.seedEvent(base, "HEARTBEAT", later, "", nil),
		e.seedEvent(base, "COMPLETED", later.Add(time.Second), "", map[string]types.AttributeValue{"output": s(`{"n": 1}`)}),
		e.seedEvent(cancelled, "CANCEL", later.Add(time.Second), "", nil),
	}
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	for what, id := range forged {
		o := e.outcome(id)
		if o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "holds") {
			t.Errorf("%s: %+v, want rejected because another holds the activity", what, o)
		}
	}
	if o := e.outcome(forged["ownerless COMPLETED"]); !strings.Contains(o.Reason, "without an owner") || strings.Contains(o.Reason, "wrapper-1") {
		t.Errorf("ownerless COMPLETED: %q, want a reason saying it names no owner, without the holder's token", o.Reason)
	}
	if a := e.activity(execID, "a1"); a.State != state.Running || a.Owner != "wrapper-1" || a.Output != "" || !a.EndTime.IsZero() {
		t.Fatalf("a1 after forged events: %s, owner %q, output %q, end %v; want RUNNING under wrapper-1, untouched", a.State, a.Owner, a.Output, a.EndTime)
	}
	for _, id := range baseOwn {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("base-contract event %s: %+v, want applied", id, o)
		}
	}
	if a := e.activity(execID, "a2"); a.State != state.Completed || a.Output != `{"n": 1}` {
		t.Errorf("a2: %s, output %q; want COMPLETED by its base-contract client", a.State, a.Output)
	}
	if a := e.activity(execID, "a3"); a.State != state.CancelledRunning {
		t.Errorf("a3: %s; want CANCELLED_RUNNING by its base-contract client", a.State)
	}

	done := e.seedEvent(held, "COMPLETED", later.Add(2*time.Second), "", map[string]types.AttributeValue{"owner": s("wrapper-1"), "output": s(`{"real": 1}`)})
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if o := e.outcome(done); o.Result != state.OutcomeApplied {
		t.Fatalf("the holder's COMPLETED: %+v, want applied", o)
	}
	if a := e.activity(execID, "a1"); a.State != state.Completed || a.Output != `{"real": 1}` {
		t.Errorf("a1: %s, output %q; want COMPLETED with the holder's output", a.State, a.Output)
	}
}

// TestEventDatedLongBeforeItWasWrittenIsRejected: a when a year back (an
// end_time forged into the past) is rejected, saying why, and moves
// nothing; an event dated now still takes effect.
func TestEventDatedLongBeforeItWasWrittenIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a1")
	now := time.Now()
	yearAgo := now.AddDate(-1, 0, 0)
	running := e.seedEvent(actID, "RUNNING", now, "", nil)
	old := e.seedEvent(actID, "COMPLETED", yearAgo, "", nil)
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if o := e.outcome(old); o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, "before the event was written") {
		t.Errorf("a year-old COMPLETED: %+v, want rejected as dated too far back", o)
	}
	if a := e.activity(execID, "a1"); a.State != state.Running || !a.EndTime.IsZero() {
		t.Fatalf("a1: %s, end %v; want RUNNING with no end", a.State, a.EndTime)
	}
	completed := e.seedEvent(actID, "COMPLETED", now.Add(time.Second), "", nil)
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	for _, id := range []string{running, completed} {
		if o := e.outcome(id); o.Result != state.OutcomeApplied {
			t.Errorf("event %s: %+v, want applied", id, o)
		}
	}
	if a := e.activity(execID, "a1"); a.State != state.Completed || a.EndTime.Before(now.Add(-time.Minute)) {
		t.Errorf("a1: %s, end %v; want COMPLETED now", a.State, a.EndTime)
	}
}

// TestEventNamingAnotherWorkflowIsRejected: an event whose workflow_name
// is not its activity's workflow is rejected, naming both.
func TestEventNamingAnotherWorkflowIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	def := e.register(eight)
	execID, _, err := workflow.Start(testbin.Context(t), e.st, def, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actID := state.ActivityExecIDFor(execID, "a1")
	now := time.Now()
	wrong := e.seedEvent(actID, "RUNNING", now, "", map[string]types.AttributeValue{"workflow_name": s("<script>other</script>")})
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	o := e.outcome(wrong)
	if o.Result != state.OutcomeRejected || !strings.Contains(o.Reason, `"<script>other</script>"`) || !strings.Contains(o.Reason, `workflow "eight"`) {
		t.Errorf("an event naming another workflow: %+v, want rejected naming both workflows", o)
	}
	if a := e.activity(execID, "a1"); a.State != state.Ready {
		t.Errorf("a1: %s; want READY, untouched", a.State)
	}
	right := e.seedEvent(actID, "RUNNING", now.Add(time.Second), "", map[string]types.AttributeValue{"workflow_name": s("eight")})
	e.process(e.processor("p"), e.records(dynamodb.TableActivityEvent))
	if o := e.outcome(right); o.Result != state.OutcomeApplied {
		t.Errorf("an event naming its own workflow: %+v, want applied", o)
	}
}
