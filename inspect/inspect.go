// Package inspect builds what operators read: a workflow execution with its
// activities laid out as the DAG (whimbrel status), listings of executions
// (whimbrel list), and counts and durations per workflow (whimbrel stats),
// as text for people and JSON for scripts.
package inspect

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Status is one workflow execution and its activities.
type Status struct {
	Workflow   Workflow   `json:"workflow"`
	Activities []Activity `json:"activities"`
	// Notifications are the execution's deliveries and deadline
	// (notify.go).
	Notifications []Notification `json:"notifications,omitempty"`
}

// Workflow is what Status and List show of an execution.
type Workflow struct {
	ID        string              `json:"workflow_exec_id"`
	Name      string              `json:"workflow_name"`
	State     state.WorkflowState `json:"state"`
	Reason    string              `json:"reason,omitempty"`
	RequestID string              `json:"workflow_request_id,omitempty"`
	Source    string              `json:"source,omitempty"`
	Started   *time.Time          `json:"start_time,omitempty"`
	Ended     *time.Time          `json:"end_time,omitempty"`
	Seconds   *float64            `json:"duration_seconds,omitempty"`
	Expires   *time.Time          `json:"expires_at,omitempty"`
	// Params are the execution's parameters.
	Params map[string]string `json:"params,omitempty"`
	// Control flow: see control.go.
	WorkflowControl
	// ParentView: see child.go.
	ParentView
}

// Activity is what Status shows of an activity.
type Activity struct {
	ID         string              `json:"activity_exec_id"`
	Name       string              `json:"activity_name"`
	State      state.ActivityState `json:"state"`
	Reason     string              `json:"reason,omitempty"`
	DependsOn  []string            `json:"depends_on,omitempty"`
	Depth      int                 `json:"depth"`
	Started    *time.Time          `json:"start_time,omitempty"`
	Ended      *time.Time          `json:"end_time,omitempty"`
	Seconds    *float64            `json:"duration_seconds,omitempty"`
	Attempt    int                 `json:"attempt"`
	Host       string              `json:"host,omitempty"`
	PID        int                 `json:"pid,omitempty"`
	LaunchedAs string              `json:"launched_as,omitempty"`
	ExitCode   *int                `json:"exit_code,omitempty"`
	Signal     string              `json:"signal,omitempty"`
	StderrTail string              `json:"stderr_tail,omitempty"`
	// HeartbeatAge is the age of the last heartbeat of a RUNNING activity.
	HeartbeatAge *float64 `json:"last_heartbeat_age_seconds,omitempty"`
	// Rejected lists the Simple Lambda API's events a processor refused.
	Rejected []RejectedEvent `json:"rejected_events,omitempty"`
	// Undecodable says why the activity's item could not be decoded (the
	// attribute and what is wrong with it); State is then the state
	// attribute as written, if any.
	Undecodable string `json:"undecodable,omitempty"`
	// Pool: the activity's pool, whether it holds its slots or why it
	// waits (pool.go).
	Pool *PoolUse `json:"pool,omitempty"`
	// Retries: see attempts.go.
	Retries
	ActivityData
	// Control flow: see control.go.
	ActivityControl
	// ChildView: see child.go.
	ChildView
	// Map counts the elements of a for_each map (see foreach.go).
	Map *MapCounts `json:"map,omitempty"`
}

// RejectedEvent is an activity event a processor did not apply, and why.
type RejectedEvent struct {
	ID         string `json:"activity_event_id"`
	Transition string `json:"transition"`
	Reason     string `json:"reason"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func seconds(from, to time.Time) *float64 {
	if from.IsZero() || to.IsZero() {
		return nil
	}
	s := to.Sub(from).Seconds()
	return &s
}

func viewWorkflow(w *state.WorkflowExec, now time.Time) Workflow {
	end := w.EndTime
	if end.IsZero() && !w.State.Terminal() {
		end = now
	}
	return Workflow{ID: w.WorkflowExecID, Name: w.WorkflowName, State: w.State, Reason: w.Reason,
		RequestID: w.WorkflowRequestID, Source: w.Source, Started: timePtr(w.StartTime), Ended: timePtr(w.EndTime),
		Seconds: seconds(w.StartTime, end), Expires: timePtr(w.Expires), Params: viewParams(w.Params),
		WorkflowControl: workflowControl(w), ParentView: parentView(w)}
}

// Load reads an execution and lays its activities out as the DAG:
// dependencies before dependents, each indented by its depth. A store that
// is also a state.Inbox (an optional capability, looked for by assertion)
// adds the Simple Lambda API events it rejected.
func Load(ctx context.Context, st workflow.Reader, id string, now time.Time) (*Status, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	if why := workflow.RunWaitReason(ctx, st, wf); why != "" && wf.Reason == "" {
		wf.Reason = why // a run waiting for max_active_runs (workflow/runs.go)
	}
	acts, err := st.Activities(ctx, id)
	skipped, err := state.Skipped(err)
	if err != nil {
		return nil, err
	}
	// An activity shows its latest attempt; the earlier ones are its
	// history. Another client's workflow has no retries: each of its
	// items is a row, whatever its name.
	def, _ := definition.FromJSON(wf.Definition)
	final := workflow.Finals(def != nil, acts)
	finals := 0 // how many items are their activity's final attempt
	for _, a := range acts {
		if final[a.ActivityExecID] == a {
			finals++
		}
	}
	byName := workflow.Latest(acts)
	order := make([]*state.ActivityExec, 0, finals)
	deps := map[string][]string{}
	if def != nil {
		for _, n := range def.Names() {
			if byName[n] != nil {
				order = append(order, byName[n])
				deps[n] = def.Activities[n].DependsOn
			}
		}
		for _, n := range def.FinallyNames() { // after the workflow's
			if byName[n] != nil {
				order = append(order, byName[n])
				deps[n] = def.Finally[n].DependsOn
			}
		}
	}
	if len(order) != finals { // no usable definition: the items' order
		order = order[:0]
		for _, a := range acts {
			if final[a.ActivityExecID] == a {
				order = append(order, a)
			}
		}
	}
	depth := map[string]int{}
	for _, a := range order { // dependencies come first
		n := a.ActivityName
		for _, up := range deps[n] {
			depth[n] = max(depth[n], depth[up]+1)
		}
	}
	s := &Status{Workflow: viewWorkflow(wf, now)}
	pools := map[string]*poolRead{}
	for _, a := range order {
		n := a.ActivityName
		end := a.EndTime
		if end.IsZero() && a.State == state.Running {
			end = now
		}
		v := Activity{ID: a.ActivityExecID, Name: n, State: a.State, Reason: a.Reason, DependsOn: deps[n],
			Depth: depth[n], Started: timePtr(a.StartTime), Ended: timePtr(a.EndTime), Seconds: seconds(a.StartTime, end),
			Attempt: a.Attempt, Host: a.Host, PID: a.PID, LaunchedAs: a.LaunchedAs, ExitCode: a.ExitCode,
			Signal: a.Signal, StderrTail: a.Error, Retries: retriesOf(def, a, acts, final)}
		// Say which Simple Lambda API events were refused, even those
		// that never moved the activity, for each attempt: events name
		// the attempt they were sent for.
		v.Rejected = rejected(ctx, st, a.ActivityExecID)
		for i := range v.Earlier {
			v.Earlier[i].Rejected = rejected(ctx, st, v.Earlier[i].ID)
		}
		v.ActivityData = viewData(a, now)
		v.ActivityControl = activityControl(def, a)
		v.Pool = poolUse(ctx, st, def, a, pools)
		v.ChildView = childView(a)
		if a.ItemIndex == nil {
			v.Map = mapCounts(a, acts)
		}
		if a.State == state.Running && a.HeartbeatEnabled {
			last := a.HeartbeatTime
			if last.IsZero() {
				last = a.StartTime
			}
			if !last.IsZero() {
				age := now.Sub(last).Seconds()
				v.HeartbeatAge = &age
			}
		}
		s.Activities = append(s.Activities, v)
	}
	// The items that cannot be decoded are shown as such, last: what they
	// claim to be, and why they cannot be read.
	for _, de := range skipped {
		name, _, err := state.SplitID(de.ID)
		if err != nil {
			name = "?"
		}
		s.Activities = append(s.Activities, Activity{ID: de.ID, Name: name, State: state.ActivityState(de.State),
			Undecodable: fmt.Sprintf("attribute %s: %s", de.Attr, de.Err)})
	}
	s.Notifications = notificationsOf(ctx, st, id)
	return s, nil
}

// eventLister is what rejected needs of a store that keeps the Simple
// Lambda API's events beside it (simpleapi/inbox.Inbox).
type eventLister interface {
	Events(ctx context.Context, activityExecID string, from time.Time) ([]*state.ActivityEvent, error)
}

// rejected lists the Simple Lambda API events a processor refused for one
// activity item. Failing to list them does not fail the status.
func rejected(ctx context.Context, st workflow.Reader, activityExecID string) []RejectedEvent {
	in, ok := st.(eventLister)
	if !ok {
		return nil
	}
	evs, err := in.Events(ctx, activityExecID, time.Time{})
	if _, err := state.Skipped(err); err != nil {
		return nil
	}
	var out []RejectedEvent
	for _, e := range evs {
		if e.Outcome.Result == state.OutcomeRejected {
			out = append(out, RejectedEvent{ID: e.ActivityEventID, Transition: e.Transition, Reason: e.Outcome.Reason})
		}
	}
	return out
}

func clock(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func took(s *float64) string {
	if s == nil {
		return "-"
	}
	return Took(time.Duration(*s * float64(time.Second)))
}

// WriteText writes the status for people, without colours.
func (s *Status) WriteText(w io.Writer) error {
	return s.WriteTextColors(w, Colors{})
}

// WriteTextColors writes the status for people, states painted by c: the
// activities as the DAG, each under what it depends on.
func (s *Status) WriteTextColors(w io.Writer, c Colors) error {
	wf := s.Workflow
	fmt.Fprintf(w, "workflow %s  %s\n", inert.String(wf.ID), c.Workflow(wf.State))
	fmt.Fprintf(w, "  started %s UTC, ended %s, took %s\n", clock(wf.Started), clock(wf.Ended), took(wf.Seconds))
	if wf.Reason != "" {
		fmt.Fprintf(w, "  why: %s\n", inert.String(wf.Reason))
	}
	wf.writeControl(w)
	if wf.Expires != nil {
		fmt.Fprintf(w, "  kept until %s UTC\n", clock(wf.Expires))
	}
	if wf.RequestID != "" || wf.Source != "" {
		fmt.Fprintf(w, "  request %s, from %s\n", inert.String(orDash(wf.RequestID)), inert.String(orDash(wf.Source)))
	}
	writeParams(w, wf.Params)
	wf.ParentView.writeText(w)
	fmt.Fprintln(w)
	// The columns are laid out by hand: the detail lines under a row
	// (why, stderr) must not widen them.
	header := []string{"ACTIVITY", "STATE", "STARTED (UTC)", "TOOK", "ATTEMPT", "WHERE", "EXIT", "HEARTBEAT"}
	rows := make([][]string, 0, len(s.Activities))
	for _, a := range s.Activities {
		where := a.LaunchedAs
		// An ECS task or a Kubernetes Job (namespace/name) says more than
		// its container's pid.
		if a.Host != "" && a.PID > 0 && !strings.HasPrefix(a.LaunchedAs, "arn:") && !strings.HasPrefix(a.LaunchedAs, "kubernetes:") {
			where = fmt.Sprintf("%s pid %d", a.Host, a.PID)
		}
		exit := "-"
		if a.ExitCode != nil {
			exit = fmt.Sprint(*a.ExitCode)
			if a.Signal != "" {
				exit += " (" + inert.String(a.Signal) + ")"
			}
		}
		hb := "-"
		if a.HeartbeatAge != nil {
			hb = fmt.Sprintf("%s ago", time.Duration(*a.HeartbeatAge*float64(time.Second)).Round(time.Second))
		}
		attempt := a.attemptText()
		name, st := a.Name, a.shownState()
		if a.Undecodable != "" {
			if name == "?" {
				name = a.ID
			}
			name, st = quoteUnprintable(name), "undecodable"
			if a.State != "" {
				st += " (" + quoteUnprintable(string(a.State)) + ")"
			}
		}
		rows = append(rows, []string{strings.Repeat("  ", a.Depth) + inert.String(name), inert.String(st), clock(a.Started), took(a.Seconds), attempt, inert.String(orDash(where)), exit, hb})
	}
	widths := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	// line writes a row; painted, if not empty, is its state cell as the
	// colours show it.
	line := func(cells []string, painted string) {
		var b strings.Builder
		for i, cell := range cells {
			shown := cell
			if painted != "" && i == 1 { // the state
				shown = painted
			}
			if i == len(cells)-1 {
				b.WriteString(shown)
				break
			}
			b.WriteString(shown + strings.Repeat(" ", widths[i]-len([]rune(cell))+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header, "")
	for i, a := range s.Activities {
		painted := ""
		if a.Undecodable == "" {
			painted = c.shownActivity(a)
		}
		line(rows[i], painted)
		indent := strings.Repeat("  ", a.Depth) + "  "
		ended := a.State.Terminal() && (a.State != state.Completed || a.Skipped)
		if ended && a.Reason != "" {
			fmt.Fprintf(w, "%swhy: %s\n", indent, inert.String(a.Reason))
		}
		// A failed launch has no stderr: its error is the reason already shown.
		if tail := strings.TrimRight(a.StderrTail, "\n"); tail != "" && ended && !strings.HasSuffix(a.Reason, tail) {
			lines := inert.Lines(tail)
			for _, l := range lines[max(0, len(lines)-5):] {
				fmt.Fprintf(w, "%sstderr: %s\n", indent, l)
			}
		}
		if a.Undecodable != "" {
			fmt.Fprintf(w, "%sitem %s cannot be decoded: %s\n", indent, quoteUnprintable(a.ID), quoteUnprintable(a.Undecodable))
		}
		for _, e := range a.Rejected {
			fmt.Fprintf(w, "%srejected event %s (%s): %s\n", indent, inert.String(e.Transition), inert.String(e.ID), inert.String(e.Reason))
		}
		if a.Pool != nil {
			fmt.Fprintf(w, "%s%s\n", indent, inert.String(a.Pool.Text()))
		}
		if a.Map != nil {
			fmt.Fprintf(w, "%s%s\n", indent, a.Map.Text())
		}
		a.writeRetries(w, indent)
		a.ActivityData.writeText(w, indent)
		a.ChildView.writeText(w, indent, c)
	}
	s.writeNotifications(w)
	return nil
}

// quoteUnprintable quotes what another client wrote when it holds
// anything a terminal would act on.
func quoteUnprintable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return strconv.Quote(s)
		}
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Lister lists executions: what List and LoadStats need of a store.
type Lister interface {
	Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error)
}

// List reads executions, newest first.
func List(ctx context.Context, st Lister, q state.WorkflowQuery, now time.Time) ([]Workflow, error) {
	wfs, err := st.Workflows(ctx, q)
	if _, err := state.Skipped(err); err != nil { // one that cannot be decoded is reported by the store
		return nil, err
	}
	out := make([]Workflow, 0, len(wfs))
	for _, w := range wfs {
		out = append(out, viewWorkflow(w, now))
	}
	runWaits(ctx, st, out)
	return out, nil
}

// WriteList writes a listing for people.
func WriteList(w io.Writer, rows []Workflow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW_EXEC_ID\tSTATE\tSTARTED (UTC)\tTOOK\tWHY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", inert.String(r.ID), inert.String(r.State.String()), clock(r.Started), took(r.Seconds), inert.String(r.Reason))
	}
	return tw.Flush()
}

// Stats are the counts and durations of one workflow's executions.
type Stats struct {
	Name        string                      `json:"workflow_name"`
	Total       int                         `json:"total"`
	ByState     map[state.WorkflowState]int `json:"by_state"`
	SuccessRate *float64                    `json:"success_rate,omitempty"` // completed / settled
	P50         *float64                    `json:"duration_p50_seconds,omitempty"`
	P95         *float64                    `json:"duration_p95_seconds,omitempty"`
	Max         *float64                    `json:"duration_max_seconds,omitempty"`
}

// Compute groups executions by workflow name. Durations are those of the
// executions that completed.
func Compute(wfs []*state.WorkflowExec) []Stats {
	by := map[string]*Stats{}
	durations := map[string][]float64{}
	for _, w := range wfs {
		s := by[w.WorkflowName]
		if s == nil {
			s = &Stats{Name: w.WorkflowName, ByState: map[state.WorkflowState]int{}}
			by[w.WorkflowName] = s
		}
		s.Total++
		s.ByState[w.State]++
		if w.State == state.WorkflowCompleted && !w.EndTime.IsZero() {
			durations[w.WorkflowName] = append(durations[w.WorkflowName], w.EndTime.Sub(w.StartTime).Seconds())
		}
	}
	var out []Stats
	for name, s := range by {
		settled := s.ByState[state.WorkflowCompleted] + s.ByState[state.WorkflowFailed] + s.ByState[state.WorkflowCancelled]
		if settled > 0 {
			r := float64(s.ByState[state.WorkflowCompleted]) / float64(settled)
			s.SuccessRate = &r
		}
		if d := durations[name]; len(d) > 0 {
			sort.Float64s(d)
			s.P50, s.P95, s.Max = &d[(len(d)-1)/2], &d[(len(d)-1)*95/100], &d[len(d)-1]
		}
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WriteStats writes statistics for people.
func WriteStats(w io.Writer, stats []Stats) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW\tTOTAL\tCOMPLETED\tFAILED\tCANCELLED\tRUNNING\tSUCCESS\tP50\tP95\tMAX")
	for _, s := range stats {
		rate := "-"
		if s.SuccessRate != nil {
			rate = fmt.Sprintf("%.1f%%", *s.SuccessRate*100)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", inert.String(s.Name), s.Total,
			s.ByState[state.WorkflowCompleted], s.ByState[state.WorkflowFailed],
			s.ByState[state.WorkflowCancelled], s.ByState[state.WorkflowRunning]+s.ByState[state.WorkflowRequested],
			rate, took(s.P50), took(s.P95), took(s.Max))
	}
	return tw.Flush()
}
