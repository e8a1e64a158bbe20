package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Notifications: the participant that records an execution's ending (the
// wrapper or monitor that settles it, the monitor that fails a start that
// never finished, cancel) writes the deliveries its definition's notify
// list asks for, right after that write, and then marks the execution's
// watch done. The watch, written when the execution starts, is how a
// monitor finishes this when that participant died in between, and how
// it finds a deadline without scanning history
// (docs/contract.md#notification). Package notify delivers.

// Body is what a delivery tells its receiver, as a JSON object.
type Body struct {
	DeliveryID     string            `json:"delivery_id"`
	Event          string            `json:"event"` // completed, failed, timed_out, cancelled or deadline_missed
	WorkflowName   string            `json:"workflow_name"`
	WorkflowExecID string            `json:"workflow_exec_id"`
	State          string            `json:"state"` // the workflow's state when the notification was written
	Reason         string            `json:"reason,omitempty"`
	StartTime      time.Time         `json:"start_time,omitzero"`
	EndTime        time.Time         `json:"end_time,omitzero"`
	Deadline       time.Time         `json:"deadline,omitzero"`
	Params         map[string]string `json:"params,omitempty"`
	Failed         []FailedActivity  `json:"failed_activities,omitempty"`
	Link           string            `json:"link,omitempty"` // the web view's page of the execution, when the deliverer knows its URL
}

// FailedActivity is an activity that did not complete, as a notification
// names it.
type FailedActivity struct {
	Name           string `json:"name"`
	ActivityExecID string `json:"activity_exec_id"`
	State          string `json:"state"`
	ExitCode       *int   `json:"exit_code,omitempty"`
	Stderr         string `json:"stderr,omitempty"` // the last lines of its stderr, or its error
}

// stderrLines is how many of an activity's last stderr lines a
// notification carries.
const stderrLines = 10

// DeliveryID is the stable ID of a notification item: every try of its
// delivery carries it, so a receiver can drop duplicates.
func DeliveryID(k state.NotificationKey) string {
	h := sha256.Sum256([]byte(k.WorkflowExecID + "\x00" + k.ID))
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// EventOf is the notification event of a settled execution: cancelled,
// completed, timed_out (it failed and one of its activities timed out),
// or failed.
func EventOf(wf *state.WorkflowExec, acts []*state.ActivityExec) string {
	switch wf.State {
	case state.WorkflowCancelled:
		return "cancelled"
	case state.WorkflowCompleted:
		return "completed"
	}
	for _, a := range acts {
		if a.State == state.TimedOut && a.RetriedBy == "" {
			return "timed_out"
		}
	}
	return "failed"
}

// Deliveries builds the delivery items of an event of an execution: one
// per notify entry that wants it, each with its stable ID and body.
func Deliveries(def *definition.Stored, wf *state.WorkflowExec, acts []*state.ActivityExec, event string, now time.Time) []*state.Notification {
	if def == nil {
		return nil
	}
	var out []*state.Notification
	for i, n := range def.Notify() {
		if !n.Wants(event) {
			continue
		}
		target, _ := json.Marshal(n) // plain fields always marshal
		k := state.NotificationKey{WorkflowExecID: wf.WorkflowExecID, ID: fmt.Sprintf("%s/%d", event, i)}
		b := Body{DeliveryID: DeliveryID(k), Event: event, WorkflowName: wf.WorkflowName, WorkflowExecID: wf.WorkflowExecID,
			State: string(wf.State), Reason: wf.Reason, StartTime: wf.StartTime, EndTime: wf.EndTime}
		if d := def.Deadline(); d > 0 && !wf.StartTime.IsZero() {
			b.Deadline = wf.StartTime.Add(time.Duration(d))
		}
		if wf.Params != "" {
			_ = json.Unmarshal([]byte(wf.Params), &b.Params) // checked when written; a bad one is left out
		}
		b.Failed = failedOf(acts)
		body, _ := json.Marshal(b) // plain fields always marshal
		out = append(out, &state.Notification{NotificationKey: k, WorkflowName: wf.WorkflowName, State: state.NotificationPending,
			Event: event, Entry: i, DeliveryID: b.DeliveryID, Body: string(body), Target: string(target), Created: now, Due: now,
			Expires: expiresOf(def, now)})
	}
	return out
}

// failedOf lists the latest attempts that ran and did not complete, by
// name: an activity cancelled before it ran has no exit code or stderr to
// tell.
func failedOf(acts []*state.ActivityExec) []FailedActivity {
	var out []FailedActivity
	for _, a := range acts {
		if a.RetriedBy != "" || a.State == state.Completed || a.State == state.Cancelled || !a.State.Terminal() {
			continue
		}
		f := FailedActivity{Name: a.ActivityName, ActivityExecID: a.ActivityExecID, State: string(a.State), ExitCode: a.ExitCode}
		if lines := strings.Split(strings.TrimRight(a.Error, "\n"), "\n"); a.Error != "" {
			f.Stderr = strings.Join(lines[max(0, len(lines)-stderrLines):], "\n")
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// expiresOf is when a notification item written at now expires: after
// the definition's retention, and the 24 hours of its tries, as the
// execution's own items do (zero: never).
func expiresOf(def *definition.Stored, now time.Time) time.Time {
	if def == nil || def.Retention() <= 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(def.Retention()) + 24*time.Hour)
}

// StoredOf reads an execution's stored definition; nil for one without
// a readable definition (another client's), which notifies nobody.
func StoredOf(wf *state.WorkflowExec) *definition.Stored {
	if wf == nil || wf.Definition == "" {
		return nil
	}
	d, err := definition.ReadStored(wf.Definition)
	if err != nil {
		return nil
	}
	return d
}

// notifies reports whether an execution's definition asks for
// notifications or has a deadline: only then has it a watch.
func notifies(def *definition.Stored) bool {
	return def != nil && (len(def.Notify()) > 0 || def.Deadline() > 0)
}

// WatchRecheck is the first interval at which a monitor looks at the
// watch of a running execution without a deadline (or before it): it
// doubles with the execution's age up to an hour, so that a long run
// costs a few writes, and an ending whose notifications were never
// written is found within about the run's age.
const WatchRecheck = 5 * time.Minute

// NextWatch is when a monitor next looks at the watch of an execution
// started at start: the deadline, if it has not fired and is sooner.
func NextWatch(start, now, deadline time.Time, fired bool) time.Time {
	next := now.Add(min(max(now.Sub(start), WatchRecheck), time.Hour))
	if !deadline.IsZero() && !fired && deadline.Before(next) {
		next = deadline
	}
	return next
}

// watch writes the watch of an execution being started, if its
// definition notifies; writing it again changes nothing.
func watch(ctx context.Context, st any, d *definition.Workflow, id string, now time.Time) error {
	ns, ok := st.(state.Notifications)
	if !ok || (len(d.Notify) == 0 && d.Deadline <= 0) {
		return nil
	}
	w := &state.Notification{NotificationKey: state.NotificationKey{WorkflowExecID: id, ID: state.WatchID},
		WorkflowName: d.Name, State: state.NotificationWatching, Created: now}
	if d.Deadline > 0 {
		w.Deadline = state.Truncate(now.Add(time.Duration(d.Deadline)))
	}
	w.Due = NextWatch(now, now, w.Deadline, false)
	if _, err := ns.PutNotifications(ctx, []*state.Notification{w}); err != nil {
		return fmt.Errorf("write the watch of %s: %w", id, err)
	}
	return nil
}

// notifyEnding writes the deliveries of a settled execution whose
// activities (and definition, when def is not nil) the caller has read,
// then marks its watch done. A failure
// is logged, never returned: the ending stands, and a monitor finishes
// the notifications from the watch.
func notifyEnding(ctx context.Context, st any, def *definition.Stored, wf *state.WorkflowExec, acts []*state.ActivityExec, log hclog.Logger) {
	ns, ok := st.(state.Notifications)
	if def == nil {
		def = StoredOf(wf)
	}
	if !ok || !notifies(def) {
		return
	}
	if err := WriteEnding(ctx, ns, def, wf, acts, time.Now()); err != nil {
		log.Warn("writing the notifications of an ending failed; a monitor writes them from the watch", "workflow_exec_id", wf.WorkflowExecID, "error", err)
	}
}

// WriteEnding writes the deliveries of a settled execution's ending, and
// marks its watch done (firing its deadline first if the run ended after
// it and nobody did). Repeating it changes nothing.
func WriteEnding(ctx context.Context, ns state.Notifications, def *definition.Stored, wf *state.WorkflowExec, acts []*state.ActivityExec, now time.Time) error {
	items := Deliveries(def, wf, acts, EventOf(wf, acts), now)
	w, err := ns.GetNotification(ctx, wf.WorkflowExecID, state.WatchID)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return err
	}
	if w != nil && !w.Deadline.IsZero() && !w.DeadlineFired && wf.EndTime.After(w.Deadline) {
		items = append(items, Deliveries(def, wf, acts, "deadline_missed", now)...)
	}
	if _, err := ns.PutNotifications(ctx, items); err != nil {
		return err
	}
	if w == nil || w.State == state.NotificationDone {
		return nil
	}
	prev := w.Version
	w.State, w.Due, w.Expires = state.NotificationDone, time.Time{}, expiresOf(def, now)
	if err := ns.UpdateNotification(ctx, w, prev); err != nil && !errors.Is(err, state.ErrConflict) {
		return err // a conflict: another participant moved it, and a monitor judges it again
	}
	return nil
}

// NotifyEnding writes the notifications of a settled execution read by
// ID: for a participant that recorded an ending without reading its
// activities (a failed start), and for the monitor that finds a watch
// whose execution ended.
func NotifyEnding(ctx context.Context, st Reader, wf *state.WorkflowExec, log hclog.Logger) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	def := StoredOf(wf)
	if _, ok := st.(state.Notifications); !ok || !notifies(def) {
		return
	}
	acts, err := st.Activities(ctx, wf.WorkflowExecID)
	if _, err = state.Skipped(err); err != nil {
		log.Warn("reading the activities of an ending to notify failed; a monitor writes them from the watch", "workflow_exec_id", wf.WorkflowExecID, "error", err)
		return
	}
	notifyEnding(ctx, st, def, wf, acts, log)
}

// notifyLost writes the notifications of an execution whose settling
// write lost: the winner writes them too, but the write that "lost" may
// have been this participant's own, applied before its answer was lost,
// and the items are written only where absent.
func notifyLost(ctx context.Context, st Settler, def *definition.Stored, id string, acts []*state.ActivityExec, log hclog.Logger) {
	if !notifies(def) {
		return
	}
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil || !wf.State.Terminal() {
		return // a monitor finishes it from the watch
	}
	notifyEnding(ctx, st, def, wf, acts, log)
}
