package attr

import (
	"time"

	"github.com/whimbrel/whimbrel/state"
)

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
	if state.ParksRetry(a) {
		// Written parked: out of the READY listing until the monitor
		// puts it back (state/retrywait.go).
		m[state.AttrRetryWait] = Epoch(a.NotBefore)
	}
	putStr(m, "output", a.Output)
	putStr(m, "progress", a.Progress)
	if a.Skipped {
		m["skipped"] = Bool(true)
	}
	if !a.ProgressTime.IsZero() {
		m["progress_time_epoch"] = Epoch(a.ProgressTime)
	}
	putParent(m, a.Parent)
	putStr(m, "map", a.Map)
	putStr(m, "item", a.Item)
	putStr(m, "map_shard", a.MapShard)
	if a.ItemIndex != nil {
		m["item_index"] = Int(*a.ItemIndex)
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
		Parent:              d.parent(),
		Map:                 d.str("map", false),
		Item:                d.str("item", false),
		MapShard:            d.str("map_shard", false),
	}
	if i, ok := d.integer("item_index"); ok && i >= 0 {
		a.ItemIndex = &i
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
	// Only a Boolean true marks a skip: another client's attribute of the
	// same name in another type is not ours to judge.
	if b, ok := m["skipped"].(Bool); ok && bool(b) {
		a.Skipped = true
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
