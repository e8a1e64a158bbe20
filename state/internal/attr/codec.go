package attr

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

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

// decoder reads one item, remembering the first problem so that a decode
// function can read every field and check once.
type decoder struct {
	table string
	key   string
	id    string
	m     Item
	err   error
}

// newDecoder starts reading an item whose key attributes are keyAttrs
// (hash key first). A key attribute that holds a control character or is
// not UTF-8 makes the item malformed at once: such an ID is no client's,
// and would drive the terminal of whoever reads it.
func newDecoder(table string, m Item, keyAttrs ...string) *decoder {
	d := &decoder{table: table, m: m}
	for i, k := range keyAttrs {
		if s, ok := m[k].(S); ok {
			if d.key != "" {
				d.key += " / "
			}
			d.key += string(s)
			if i == 0 {
				d.id = string(s)
			}
		}
	}
	for _, k := range keyAttrs {
		if s, ok := m[k].(S); ok && !cleanID(string(s)) {
			d.fail(k, "%q holds a control character or is not UTF-8", string(s))
		}
	}
	return d
}

// cleanID reports whether an ID is printable UTF-8.
func cleanID(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func (d *decoder) fail(attr, format string, args ...any) {
	if d.err == nil {
		e := &state.DecodeError{Table: d.table, Key: d.key, ID: d.id, Attr: attr, Err: fmt.Sprintf(format, args...)}
		if s, ok := d.m["state"].(S); ok {
			e.State = string(s)
		}
		d.err = e
	}
}

func typeName(v Value) string {
	if v == nil {
		return "NULL"
	}
	return v.kind()
}

// str reads a String; a required one must be present and non-empty.
func (d *decoder) str(attr string, required bool) string {
	v, ok := d.m[attr]
	if !ok {
		if required {
			d.fail(attr, "missing (want a String)")
		}
		return ""
	}
	s, ok := v.(S)
	if !ok {
		d.fail(attr, "is %s, want a String", typeName(v))
		return ""
	}
	if required && s == "" {
		d.fail(attr, "is empty")
	}
	return string(s)
}

func (d *decoder) number(attr string) (float64, bool) {
	v, ok := d.m[attr]
	if !ok {
		return 0, false
	}
	n, ok := v.(N)
	if !ok {
		d.fail(attr, "is %s, want a Number", typeName(v))
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(attr, "%q is not a number", string(n))
		return 0, false
	}
	return f, true
}

// integer reads a whole Number that fits an int32-sized range.
func (d *decoder) integer(attr string) (int, bool) {
	f, ok := d.number(attr)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		d.fail(attr, "%v is not a whole number in range", f)
		return 0, false
	}
	return int(f), true
}

func (d *decoder) seconds(attr string) time.Duration {
	f, ok := d.number(attr)
	if !ok {
		return 0
	}
	if f < 0 || f > 1e9 {
		d.fail(attr, "%v seconds is out of range", f)
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

func (d *decoder) boolean(attr string) bool {
	v, ok := d.m[attr]
	if !ok {
		return false
	}
	b, ok := v.(Bool)
	if !ok {
		d.fail(attr, "is %s, want a Boolean", typeName(v))
		return false
	}
	return bool(b)
}

func (d *decoder) stringSet(attr string) []string {
	v, ok := d.m[attr]
	if !ok {
		return nil
	}
	ss, ok := v.(SS)
	if !ok {
		d.fail(attr, "is %s, want a String Set", typeName(v))
		return nil
	}
	out := append([]string(nil), ss...)
	sort.Strings(out)
	return out
}

// time reads name_epoch, or the list when only that was written. A
// negative epoch means "not set" (docs/contract.md#times).
func (d *decoder) time(name string) time.Time {
	if f, ok := d.number(name + "_epoch"); ok {
		if f < 0 {
			return time.Time{}
		}
		t, err := state.ParseEpoch(strconv.FormatFloat(f, 'f', -1, 64))
		if err != nil {
			d.fail(name+"_epoch", "%v", err)
		}
		return t
	}
	v, ok := d.m[name]
	if !ok {
		return time.Time{}
	}
	l, ok := v.(L)
	if !ok {
		d.fail(name, "is %s, want a List [year, month, day, hour, minute, second]", typeName(v))
		return time.Time{}
	}
	if len(l) != 6 {
		d.fail(name, "has %d elements, want 6: [year, month, day, hour, minute, second]", len(l))
		return time.Time{}
	}
	var tl state.TimeList
	for i, e := range l {
		n, ok := e.(N)
		if !ok {
			d.fail(name, "element %d is %s, want a Number", i, typeName(e))
			return time.Time{}
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			d.fail(name, "element %d %q is not a number", i, string(n))
			return time.Time{}
		}
		tl[i] = f
	}
	t, err := tl.Time()
	if err != nil {
		d.fail(name, "%v", err)
	}
	return t
}

// expires reads the TTL attribute: whole epoch seconds.
func (d *decoder) expires() time.Time {
	f, ok := d.number(ExpiresAt)
	if !ok || f <= 0 {
		return time.Time{}
	}
	if f > 1e11 {
		d.fail(ExpiresAt, "%v seconds is out of range", f)
		return time.Time{}
	}
	return time.Unix(int64(f), 0).UTC()
}

func (d *decoder) activityState(attr string) state.ActivityState {
	s := state.ActivityState(d.str(attr, true))
	if d.err == nil && !s.Valid() {
		d.fail(attr, "%q is not an activity state", string(s))
	}
	return s
}

func (d *decoder) workflowState(attr string) state.WorkflowState {
	s := state.WorkflowState(d.str(attr, true))
	if d.err == nil && !s.Valid() {
		d.fail(attr, "%q is not a workflow state", string(s))
	}
	return s
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

// --- activity_exec

// ActivityKey is the key of an activity item.
func ActivityKey(k state.ActivityKey) Item {
	return Item{
		"activity_exec_id": S(k.ActivityExecID),
		"workflow_exec_id": S(k.WorkflowExecID),
	}
}

// maxEpoch bounds the epochs read: the year 5138, far past any real time,
// well inside what time.Time holds.
const maxEpoch = 1e11

func EncodeActivity(a *state.ActivityExec) Item {
	m := ActivityKey(a.ActivityKey)
	m["workflow_name"] = S(a.WorkflowName)
	m["activity_name"] = S(a.ActivityName)
	m["state"] = S(a.State)
	m["heartbeat_enabled"] = Bool(a.HeartbeatEnabled)
	putTime(m, "state_time", a.StateTime, false)
	putTime(m, "queued_time", a.QueuedTime, false)
	putTime(m, "start_time", a.StartTime, true)
	putTime(m, "end_time", a.EndTime, false)
	putTime(m, "heartbeat_time", a.HeartbeatTime, true)
	if a.HeartbeatInterval > 0 {
		m["heartbeat_interval"] = Seconds(a.HeartbeatInterval)
	}
	if a.HeartbeatTimeout > 0 {
		m["heartbeat_timeout"] = Seconds(a.HeartbeatTimeout)
	}
	if len(a.PendingDependencies) > 0 {
		m["pending_dependencies"] = SS(a.PendingDependencies)
	}
	putStr(m, "owner", a.Owner)
	if a.Attempt > 0 {
		m["attempt"] = Int(a.Attempt)
	}
	putStr(m, "host", a.Host)
	if a.PID > 0 {
		m["pid"] = Int(a.PID)
	}
	putStr(m, "launched_as", a.LaunchedAs)
	if a.ExitCode != nil {
		m["exit_code"] = Int(*a.ExitCode)
	}
	putStr(m, "signal", a.Signal)
	putStr(m, "error", a.Error)
	putStr(m, "reason", a.Reason)
	putStr(m, "event_cursor", a.EventCursor)
	putStr(m, "retry_of", a.RetryOf)
	putStr(m, "retried_by", a.RetriedBy)
	if !a.NotBefore.IsZero() {
		m["not_before"] = Epoch(a.NotBefore)
	}
	putStr(m, "output", a.Output)
	putStr(m, "progress", a.Progress)
	if !a.ProgressTime.IsZero() {
		m["progress_time_epoch"] = Epoch(a.ProgressTime)
	}
	return m
}

func DecodeActivity(table string, m Item) (*state.ActivityExec, error) {
	d := newDecoder(table, m, "activity_exec_id", "workflow_exec_id")
	a := &state.ActivityExec{
		ActivityKey: state.ActivityKey{
			ActivityExecID: d.str("activity_exec_id", true),
			WorkflowExecID: d.str("workflow_exec_id", true),
		},
		WorkflowName:        d.str("workflow_name", false),
		ActivityName:        d.str("activity_name", false),
		State:               d.activityState("state"),
		StateTime:           d.time("state_time"),
		QueuedTime:          d.time("queued_time"),
		StartTime:           d.time("start_time"),
		EndTime:             d.time("end_time"),
		HeartbeatEnabled:    d.boolean("heartbeat_enabled"),
		HeartbeatTime:       d.time("heartbeat_time"),
		HeartbeatInterval:   d.seconds("heartbeat_interval"),
		HeartbeatTimeout:    d.seconds("heartbeat_timeout"),
		PendingDependencies: d.stringSet("pending_dependencies"),
		Owner:               d.str("owner", false),
		Host:                d.str("host", false),
		LaunchedAs:          d.str("launched_as", false),
		Signal:              d.str("signal", false),
		Error:               d.str("error", false),
		Reason:              d.str("reason", false),
		Expires:             d.expires(),
		EventCursor:         d.str("event_cursor", false),
		Output:              d.str("output", false),
		Progress:            d.str("progress", false),
		ProgressTime:        d.time("progress_time"),
		RetryOf:             d.str("retry_of", false),
		RetriedBy:           d.str("retried_by", false),
	}
	if nb, ok := d.number("not_before"); ok && nb > 0 {
		if nb > maxEpoch {
			d.fail("not_before", "%v is not an epoch in seconds", nb)
		} else {
			a.NotBefore = time.UnixMilli(int64(nb * 1000)).UTC()
		}
	}
	a.Attempt, _ = d.integer("attempt")
	a.PID, _ = d.integer("pid")
	if code, ok := d.integer("exit_code"); ok {
		a.ExitCode = &code
	}
	if a.ActivityName == "" && d.err == nil {
		// Foreign clients may omit it; the ID carries it.
		a.ActivityName, _, _ = state.SplitID(a.ActivityExecID)
	}
	return a, d.err
}

// --- activity_exec_dependency

func EncodeDependency(dep *state.Dependency) Item {
	return Item{
		"activity_exec_dependency":   S(dep.ID),
		"activity_exec_id":           S(dep.ActivityExecID),
		"workflow_exec_id":           S(dep.WorkflowExecID),
		"dependent_activity_exec_id": S(dep.DependentActivityExecID),
	}
}

func DecodeDependency(table string, m Item) (state.Dependency, error) {
	d := newDecoder(table, m, "activity_exec_dependency", "activity_exec_id")
	dep := state.Dependency{
		ID:                      d.str("activity_exec_dependency", true),
		ActivityExecID:          d.str("activity_exec_id", true),
		WorkflowExecID:          d.str("workflow_exec_id", true),
		DependentActivityExecID: d.str("dependent_activity_exec_id", true),
	}
	return dep, d.err
}

// --- install_status

func EncodeInstallStatus(s *state.InstallStatus) Item {
	m := Item{
		"object_id":   S(s.ObjectID),
		"object_type": S(s.ObjectType),
		"version":     Int(s.Version),
	}
	putStr(m, "description", s.Description)
	return m
}

func DecodeInstallStatus(table string, m Item) (*state.InstallStatus, error) {
	d := newDecoder(table, m, "object_id", "object_type")
	s := &state.InstallStatus{
		ObjectID:    d.str("object_id", true),
		ObjectType:  d.str("object_type", true),
		Description: d.str("description", false),
	}
	s.Version, _ = d.integer("version")
	return s, d.err
}

// DecodeRef reads what the state index holds of an activity.
func DecodeRef(table string, m Item) (state.ActivityRef, error) {
	d := newDecoder(table, m, "activity_exec_id", "workflow_exec_id")
	ref := state.ActivityRef{
		ActivityKey: state.ActivityKey{
			ActivityExecID: d.str("activity_exec_id", true),
			WorkflowExecID: d.str("workflow_exec_id", true),
		},
		StateTime: d.time("state_time"),
	}
	return ref, d.err
}
