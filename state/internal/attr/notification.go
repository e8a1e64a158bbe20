package attr

import (
	"fmt"
	"strconv"

	"github.com/whimbrel/whimbrel/state"
)

// --- notification

// NotificationShard is the due index's hash key of a notification item:
// the items are spread over state.NotificationShards partitions by their
// execution, with the same hash as the schedules' shards.
func NotificationShard(workflowExecID string) string {
	var h uint32 = 2166136261 // FNV-1a: stable across processes and versions
	for i := 0; i < len(workflowExecID); i++ {
		h ^= uint32(workflowExecID[i])
		h *= 16777619
	}
	return fmt.Sprintf("due/%d", h%state.NotificationShards)
}

// EncodeNotification writes a notification item. Only an item with a due
// time carries the due index's keys (due_shard, due_epoch), so the index
// holds nothing else: a delivered notification leaves it.
func EncodeNotification(n *state.Notification) Item {
	m := Item{
		"workflow_exec_id": S(n.WorkflowExecID),
		"notification_id":  S(n.ID),
		"delivery_state":   S(n.State),
		"version":          Int(n.Version),
	}
	putStr(m, "workflow_name", n.WorkflowName)
	putStr(m, "event", n.Event)
	putStr(m, "delivery_id", n.DeliveryID)
	putStr(m, "body", n.Body)
	putStr(m, "target", n.Target)
	putStr(m, "holder", n.Holder)
	putStr(m, "last_error", n.LastError)
	if n.ID != state.WatchID {
		m["entry"] = Int(n.Entry)
	}
	if n.Attempts > 0 {
		m["attempts"] = Int(n.Attempts)
	}
	if n.DeadlineFired {
		m["deadline_fired"] = Bool(true)
	}
	putTime(m, "created_time", n.Created, false)
	putTime(m, "delivered_time", n.Delivered, false)
	putTime(m, "deadline_time", n.Deadline, false)
	if !n.Expires.IsZero() {
		m[ExpiresAt] = N(strconv.FormatInt(n.Expires.Unix(), 10))
	}
	if !n.Due.IsZero() {
		putTime(m, "due", n.Due, false)
		m["due_shard"] = S(NotificationShard(n.WorkflowExecID))
	}
	return m
}

// DecodeNotification reads a notification item. Every attribute but the
// keys is optional: an item without a delivery_state is PENDING.
func DecodeNotification(table string, m Item) (*state.Notification, error) {
	d := newDecoder(table, m, "workflow_exec_id", "notification_id")
	n := &state.Notification{
		NotificationKey: state.NotificationKey{WorkflowExecID: d.str("workflow_exec_id", true), ID: d.str("notification_id", true)},
		WorkflowName:    d.str("workflow_name", false),
		State:           state.NotificationState(d.str("delivery_state", false)),
		Event:           d.str("event", false),
		DeliveryID:      d.str("delivery_id", false),
		Body:            d.str("body", false),
		Target:          d.str("target", false),
		Holder:          d.str("holder", false),
		LastError:       d.str("last_error", false),
		Created:         d.time("created_time"),
		Delivered:       d.time("delivered_time"),
		Deadline:        d.time("deadline_time"),
		Due:             d.time("due"),
		DeadlineFired:   d.boolean("deadline_fired"),
	}
	n.Expires = d.expires()
	n.Entry, _ = d.integer("entry")
	n.Attempts, _ = d.integer("attempts")
	n.Version, _ = d.integer("version")
	switch n.State {
	case "":
		n.State = state.NotificationPending
	case state.NotificationPending, state.NotificationDelivered, state.NotificationUndeliverable,
		state.NotificationWatching, state.NotificationDone:
	default:
		d.fail("delivery_state", "%q is not a notification state (PENDING, DELIVERED, UNDELIVERABLE, WATCHING, DONE)", n.State)
	}
	return n, d.err
}

// NotificationVersion is the version a stored notification item holds (0:
// none, or none readable).
func NotificationVersion(m Item) int {
	if v, ok := m["version"].(N); ok {
		i, _ := strconv.Atoi(string(v))
		return i
	}
	return 0
}
