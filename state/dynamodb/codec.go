package dynamodb

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
)

// Items are encoded by hand rather than with struct tags: every time is
// written twice (the seed's list and an epoch), absent times are written as
// negative epochs where the seed says so, and decoding must turn a foreign
// client's missing or mistyped attribute into a *state.ItemError naming it.

type item = map[string]types.AttributeValue

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func avN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
func avInt(v int) types.AttributeValue  { return avN(strconv.Itoa(v)) }
func avBool(v bool) types.AttributeValue {
	return &types.AttributeValueMemberBOOL{Value: v}
}
func avSeconds(d time.Duration) types.AttributeValue {
	return avN(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
}

// avList encodes a time as the seed's [Y, M, D, h, m, s] list of Numbers.
func avList(t time.Time) types.AttributeValue {
	l := state.NewTimeList(t)
	vals := make([]types.AttributeValue, len(l))
	for i, v := range l {
		vals[i] = avN(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return &types.AttributeValueMemberL{Value: vals}
}

// putTime writes name (the list) and name_epoch. A zero time writes only
// the epoch, as notSet when the seed gives the attribute a negative "not
// yet" value, and nothing otherwise.
func putTime(m item, name string, t time.Time, notSet bool) {
	if t.IsZero() {
		if notSet {
			m[name+"_epoch"] = avInt(state.NotSet)
		}
		return
	}
	m[name] = avList(t)
	m[name+"_epoch"] = avN(state.FormatEpoch(t))
}

func putStr(m item, name, v string) {
	if v != "" {
		m[name] = avS(v)
	}
}

// decoder reads one item, remembering the first problem so that a decode
// function can read every field and check once.
type decoder struct {
	table string
	key   string
	m     item
	err   error
}

func newDecoder(table string, m item, keyAttrs ...string) *decoder {
	d := &decoder{table: table, m: m}
	for _, k := range keyAttrs {
		if s, ok := m[k].(*types.AttributeValueMemberS); ok {
			if d.key != "" {
				d.key += "/"
			}
			d.key += s.Value
		}
	}
	return d
}

func (d *decoder) fail(attr, format string, args ...any) {
	if d.err == nil {
		d.err = &state.ItemError{Table: d.table, Key: d.key, Attr: attr, Err: fmt.Sprintf(format, args...)}
	}
}

func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "a String"
	case *types.AttributeValueMemberN:
		return "a Number"
	case *types.AttributeValueMemberBOOL:
		return "a Boolean"
	case *types.AttributeValueMemberL:
		return "a List"
	case *types.AttributeValueMemberM:
		return "a Map"
	case *types.AttributeValueMemberSS:
		return "a String Set"
	case *types.AttributeValueMemberNS:
		return "a Number Set"
	case *types.AttributeValueMemberB:
		return "Binary"
	case *types.AttributeValueMemberBS:
		return "a Binary Set"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	}
	return "an unknown type"
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
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		d.fail(attr, "is %s, want a String", typeName(v))
		return ""
	}
	if required && s.Value == "" {
		d.fail(attr, "is empty")
	}
	return s.Value
}

func (d *decoder) number(attr string) (float64, bool) {
	v, ok := d.m[attr]
	if !ok {
		return 0, false
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		d.fail(attr, "is %s, want a Number", typeName(v))
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.fail(attr, "%q is not a number", n.Value)
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
	b, ok := v.(*types.AttributeValueMemberBOOL)
	if !ok {
		d.fail(attr, "is %s, want a Boolean", typeName(v))
		return false
	}
	return b.Value
}

func (d *decoder) stringSet(attr string) []string {
	v, ok := d.m[attr]
	if !ok {
		return nil
	}
	ss, ok := v.(*types.AttributeValueMemberSS)
	if !ok {
		d.fail(attr, "is %s, want a String Set", typeName(v))
		return nil
	}
	out := append([]string(nil), ss.Value...)
	sort.Strings(out)
	return out
}

// time reads name_epoch, or the seed's list when only that was written. A
// negative epoch is the seed's "not set".
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
	l, ok := v.(*types.AttributeValueMemberL)
	if !ok {
		d.fail(name, "is %s, want a List [year, month, day, hour, minute, second]", typeName(v))
		return time.Time{}
	}
	if len(l.Value) != 6 {
		d.fail(name, "has %d elements, want 6: [year, month, day, hour, minute, second]", len(l.Value))
		return time.Time{}
	}
	var tl state.TimeList
	for i, e := range l.Value {
		n, ok := e.(*types.AttributeValueMemberN)
		if !ok {
			d.fail(name, "element %d is %s, want a Number", i, typeName(e))
			return time.Time{}
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			d.fail(name, "element %d %q is not a number", i, n.Value)
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

func encodeWorkflow(w *state.WorkflowExec) item {
	m := item{
		"workflow_exec_id": avS(w.WorkflowExecID),
		"workflow_name":    avS(w.WorkflowName),
		"state":            avS(string(w.State)),
	}
	putStr(m, "workflow_request_id", w.WorkflowRequestID)
	putTime(m, "start_time", w.StartTime, false)
	putTime(m, "end_time", w.EndTime, false)
	putStr(m, "source", w.Source)
	putStr(m, "definition", w.Definition)
	putStr(m, "reason", w.Reason)
	return m
}

func decodeWorkflow(table string, m item) (*state.WorkflowExec, error) {
	d := newDecoder(table, m, "workflow_exec_id")
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
	}
	return w, d.err
}

// --- workflow_request

func encodeRequest(r *state.WorkflowRequest) item {
	m := item{
		"workflow_request_id": avS(r.WorkflowRequestID),
		"workflow_name":       avS(r.WorkflowName),
	}
	putTime(m, "when", r.When, false)
	putStr(m, "source", r.Source)
	if r.Manual {
		m["manual"] = avBool(true)
	}
	putStr(m, "workflow_exec_id", r.WorkflowExecID)
	return m
}

func decodeRequest(table string, m item) (*state.WorkflowRequest, error) {
	d := newDecoder(table, m, "workflow_request_id")
	r := &state.WorkflowRequest{
		WorkflowRequestID: d.str("workflow_request_id", true),
		WorkflowName:      d.str("workflow_name", true),
		When:              d.time("when"),
		Source:            d.str("source", false),
		Manual:            d.boolean("manual"),
		WorkflowExecID:    d.str("workflow_exec_id", false),
	}
	return r, d.err
}

// --- activity_exec

func activityKey(k state.ActivityKey) item {
	return item{
		"activity_exec_id": avS(k.ActivityExecID),
		"workflow_exec_id": avS(k.WorkflowExecID),
	}
}

func encodeActivity(a *state.ActivityExec) item {
	m := activityKey(a.ActivityKey)
	m["workflow_name"] = avS(a.WorkflowName)
	m["activity_name"] = avS(a.ActivityName)
	m["state"] = avS(string(a.State))
	m["heartbeat_enabled"] = avBool(a.HeartbeatEnabled)
	putTime(m, "state_time", a.StateTime, false)
	putTime(m, "queued_time", a.QueuedTime, false)
	putTime(m, "start_time", a.StartTime, true)
	putTime(m, "end_time", a.EndTime, false)
	putTime(m, "heartbeat_time", a.HeartbeatTime, true)
	if a.HeartbeatInterval > 0 {
		m["heartbeat_interval"] = avSeconds(a.HeartbeatInterval)
	}
	if a.HeartbeatTimeout > 0 {
		m["heartbeat_timeout"] = avSeconds(a.HeartbeatTimeout)
	}
	if len(a.PendingDependencies) > 0 {
		m["pending_dependencies"] = &types.AttributeValueMemberSS{Value: a.PendingDependencies}
	}
	putStr(m, "owner", a.Owner)
	if a.Attempt > 0 {
		m["attempt"] = avInt(a.Attempt)
	}
	putStr(m, "host", a.Host)
	if a.PID > 0 {
		m["pid"] = avInt(a.PID)
	}
	putStr(m, "launched_as", a.LaunchedAs)
	if a.ExitCode != nil {
		m["exit_code"] = avInt(*a.ExitCode)
	}
	putStr(m, "signal", a.Signal)
	putStr(m, "error", a.Error)
	putStr(m, "reason", a.Reason)
	return m
}

func decodeActivity(table string, m item) (*state.ActivityExec, error) {
	d := newDecoder(table, m, "activity_exec_id")
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

func encodeDependency(dep *state.Dependency) item {
	return item{
		"activity_exec_dependency":   avS(dep.ID),
		"activity_exec_id":           avS(dep.ActivityExecID),
		"workflow_exec_id":           avS(dep.WorkflowExecID),
		"dependent_activity_exec_id": avS(dep.DependentActivityExecID),
	}
}

func decodeDependency(table string, m item) (state.Dependency, error) {
	d := newDecoder(table, m, "activity_exec_dependency")
	dep := state.Dependency{
		ID:                      d.str("activity_exec_dependency", true),
		ActivityExecID:          d.str("activity_exec_id", true),
		WorkflowExecID:          d.str("workflow_exec_id", true),
		DependentActivityExecID: d.str("dependent_activity_exec_id", true),
	}
	return dep, d.err
}

// --- install_status

func encodeInstallStatus(s *state.InstallStatus) item {
	m := item{
		"object_id":   avS(s.ObjectID),
		"object_type": avS(s.ObjectType),
		"version":     avInt(s.Version),
	}
	putStr(m, "description", s.Description)
	return m
}

func decodeInstallStatus(table string, m item) (*state.InstallStatus, error) {
	d := newDecoder(table, m, "object_id")
	s := &state.InstallStatus{
		ObjectID:    d.str("object_id", true),
		ObjectType:  d.str("object_type", true),
		Description: d.str("description", false),
	}
	s.Version, _ = d.integer("version")
	return s, d.err
}
