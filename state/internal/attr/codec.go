package attr

import (
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// Items are encoded by hand rather than with struct tags: every time is
// written twice (the contract's list and an epoch), absent times are written
// as negative epochs where the contract says so (docs/contract.md#times), and decoding must turn a foreign
// client's missing or mistyped attribute into a *state.DecodeError naming it.
// A decode function returns what it could read along with the first error,
// so a caller may still use the attributes it needs.

// putTime writes name (the list) and name_epoch. A zero time writes only
// the epoch, as notSet when the contract gives the attribute a negative "not
// yet" value, and nothing otherwise.
func putTime(m Item, name string, t time.Time, notSet bool) {
	if t.IsZero() {
		if notSet {
			m[name+"_epoch"] = Int(state.NotSet)
		}
		return
	}
	m[name] = List(t)
	m[name+"_epoch"] = Epoch(t)
}

func putStr(m Item, name, v string) {
	if v != "" {
		m[name] = S(v)
	}
}

// --- workflow_exec

func EncodeWorkflow(w *state.WorkflowExec) Item {
	m := Item{
		"workflow_exec_id": S(w.WorkflowExecID),
		"workflow_name":    S(w.WorkflowName),
		"state":            S(w.State),
	}
	putStr(m, "workflow_request_id", w.WorkflowRequestID)
	putTime(m, "start_time", w.StartTime, false)
	putTime(m, "end_time", w.EndTime, false)
	putStr(m, "source", w.Source)
	putStr(m, "definition", w.Definition)
	putStr(m, "reason", w.Reason)
	putStr(m, "params", w.Params)
	putStr(m, "outcome", string(w.Outcome))
	putStr(m, "decided_by", w.DecidedBy)
	putStr(m, "finally_failed", w.FinallyFailed)
	putParent(m, w.Parent)
	return m
}

func DecodeWorkflow(table string, m Item) (*state.WorkflowExec, error) {
	d := newDecoder(table, m, "workflow_exec_id", "workflow_name")
	w := &state.WorkflowExec{
		WorkflowExecID:    d.str("workflow_exec_id", true),
		WorkflowName:      d.str("workflow_name", true),
		State:             d.workflowState("state"),
		WorkflowRequestID: d.str("workflow_request_id", false),
		StartTime:         d.time("start_time"),
		EndTime:           d.time("end_time"),
		Source:            d.str("source", false),
		Definition:        d.str("definition", false),
		Reason:            d.str("reason", false),
		Expires:           d.expires(),
		Params:            d.str("params", false),
		DecidedBy:         d.str("decided_by", false),
		FinallyFailed:     d.str("finally_failed", false),
		Parent:            d.parent(),
	}
	// An outcome that is not a settled state is not one this contract
	// wrote: it is ignored rather than trusted.
	if o := state.WorkflowState(d.str("outcome", false)); o.Terminal() {
		w.Outcome = o
	}
	return w, d.err
}

// --- workflow_request

func EncodeRequest(r *state.WorkflowRequest) Item {
	m := Item{
		"workflow_request_id": S(r.WorkflowRequestID),
		"workflow_name":       S(r.WorkflowName),
	}
	putTime(m, "when", r.When, false)
	putStr(m, "source", r.Source)
	if r.Manual {
		m["manual"] = Bool(true)
	}
	putStr(m, "workflow_exec_id", r.WorkflowExecID)
	putStr(m, "params", r.Params)
	putOutcome(m, r.Outcome)
	return m
}

func DecodeRequest(table string, m Item) (*state.WorkflowRequest, error) {
	d := newDecoder(table, m, "workflow_request_id", "workflow_name")
	r := &state.WorkflowRequest{
		WorkflowRequestID: d.str("workflow_request_id", true),
		WorkflowName:      d.str("workflow_name", true),
		When:              d.time("when"),
		Source:            d.str("source", false),
		Manual:            d.boolean("manual"),
		WorkflowExecID:    d.str("workflow_exec_id", false),
		Params:            d.str("params", false),
		Outcome:           d.outcome(),
	}
	return r, d.err
}

// --- outcomes of the Simple Lambda API

func putOutcome(m Item, o state.Outcome) {
	for k, v := range OutcomeItem(o) {
		m[k] = v
	}
}

// OutcomeItem is the attributes that record an outcome.
func OutcomeItem(o state.Outcome) Item {
	m := Item{}
	if o.Result == "" {
		return m
	}
	m["outcome"] = S(o.Result)
	putStr(m, "outcome_reason", o.Reason)
	putTime(m, "processed_time", o.At, false)
	return m
}

func (d *decoder) outcome() state.Outcome {
	return state.Outcome{
		Result: d.str("outcome", false),
		Reason: d.str("outcome_reason", false),
		At:     d.time("processed_time"),
	}
}

// --- activity_event

func EncodeEvent(e *state.ActivityEvent) Item {
	m := Item{
		"activity_event_id": S(e.ActivityEventID),
		"activity_exec_id":  S(e.ActivityExecID),
	}
	putStr(m, "workflow_exec_id", e.WorkflowExecID)
	putStr(m, "workflow_name", e.WorkflowName)
	putStr(m, "activity_name", e.ActivityName)
	putTime(m, "when", e.When, false)
	putStr(m, "source", e.Source)
	if e.Manual {
		m["manual"] = Bool(true)
	}
	putStr(m, "transition", e.Transition)
	putStr(m, "owner", e.Owner)
	putStr(m, "host", e.Host)
	if e.PID > 0 {
		m["pid"] = Int(e.PID)
	}
	if e.HeartbeatEnabled {
		m["heartbeat_enabled"] = Bool(true)
	}
	if e.HeartbeatInterval > 0 {
		m["heartbeat_interval"] = Seconds(e.HeartbeatInterval)
	}
	if e.HeartbeatTimeout > 0 {
		m["heartbeat_timeout"] = Seconds(e.HeartbeatTimeout)
	}
	if e.ExitCode != nil {
		m["exit_code"] = Int(*e.ExitCode)
	}
	putStr(m, "signal", e.Signal)
	putStr(m, "error", e.Error)
	putStr(m, "reason", e.Reason)
	putStr(m, "output", e.Output)
	putStr(m, "progress", e.Progress)
	putOutcome(m, e.Outcome)
	return m
}

// DecodeEvent reads an event. Its keys and a known transition (an
// activity state, CANCEL or HEARTBEAT) are required.
func DecodeEvent(table string, m Item) (*state.ActivityEvent, error) {
	d := newDecoder(table, m, "activity_event_id", "activity_exec_id")
	// The base contract's event names its activity by activity_exec_id alone and
	// has no when_epoch; workflow_exec_id is Whimbrel's addition. With no
	// when at all, the processor takes the time the item was written.
	e := &state.ActivityEvent{
		ActivityEventID:   d.str("activity_event_id", true),
		ActivityExecID:    d.str("activity_exec_id", true),
		WorkflowExecID:    d.str("workflow_exec_id", false),
		WorkflowName:      d.str("workflow_name", false),
		ActivityName:      d.str("activity_name", false),
		When:              d.time("when"),
		Source:            d.str("source", false),
		Manual:            d.boolean("manual"),
		Transition:        d.str("transition", true),
		Owner:             d.str("owner", false),
		Host:              d.str("host", false),
		HeartbeatEnabled:  d.boolean("heartbeat_enabled"),
		HeartbeatInterval: d.seconds("heartbeat_interval"),
		HeartbeatTimeout:  d.seconds("heartbeat_timeout"),
		Signal:            d.str("signal", false),
		Error:             d.str("error", false),
		Reason:            d.str("reason", false),
		Output:            d.str("output", false),
		Progress:          d.str("progress", false),
		Outcome:           d.outcome(),
	}
	e.PID, _ = d.integer("pid")
	if code, ok := d.integer("exit_code"); ok {
		e.ExitCode = &code
	}
	if d.err == nil && e.Transition != state.TransitionHeartbeat && e.Transition != state.TransitionCancel && !state.ActivityState(e.Transition).Valid() {
		d.fail("transition", "%q is neither an activity state, %s nor %s", e.Transition, state.TransitionCancel, state.TransitionHeartbeat)
	}
	if d.err == nil && e.WorkflowName == "" && e.WorkflowExecID != "" {
		e.WorkflowName, _, _ = state.SplitID(e.WorkflowExecID)
	}
	return e, d.err
}

// --- workflow_lambda

func EncodeRegistration(r *state.WorkflowLambda) Item {
	m := Item{"workflow_name": S(r.WorkflowName)}
	putStr(m, "lambda", r.Lambda)
	putStr(m, "definition", r.Definition)
	putTime(m, "registered_time", r.Registered, false)
	putStr(m, "source", r.Source)
	return m
}

func DecodeRegistration(table string, m Item) (*state.WorkflowLambda, error) {
	d := newDecoder(table, m, "workflow_name")
	r := &state.WorkflowLambda{
		WorkflowName: d.str("workflow_name", true),
		Lambda:       d.str("lambda", false),
		Definition:   d.str("definition", false),
		Registered:   d.time("registered_time"),
		Source:       d.str("source", false),
	}
	return r, d.err
}

// putParent writes the link of a child workflow's item to its parent
// activity, when it has one.
func putParent(m Item, p state.Parent) {
	putStr(m, "parent_workflow_exec_id", p.ParentWorkflowExecID)
	putStr(m, "parent_activity_exec_id", p.ParentActivityExecID)
}

// parent reads what putParent writes.
func (d *decoder) parent() state.Parent {
	return state.Parent{
		ParentWorkflowExecID: d.str("parent_workflow_exec_id", false),
		ParentActivityExecID: d.str("parent_activity_exec_id", false),
	}
}
