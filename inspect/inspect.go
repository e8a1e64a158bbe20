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
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Status is one workflow execution and its activities.
type Status struct {
	Workflow   Workflow   `json:"workflow"`
	Activities []Activity `json:"activities"`
}

// Workflow is what Status and List show of an execution.
type Workflow struct {
	ID        string     `json:"workflow_exec_id"`
	Name      string     `json:"workflow_name"`
	State     string     `json:"state"`
	Reason    string     `json:"reason,omitempty"`
	RequestID string     `json:"workflow_request_id,omitempty"`
	Source    string     `json:"source,omitempty"`
	Started   *time.Time `json:"start_time,omitempty"`
	Ended     *time.Time `json:"end_time,omitempty"`
	Seconds   *float64   `json:"duration_seconds,omitempty"`
	Expires   *time.Time `json:"expires_at,omitempty"`
	// Params are the execution's parameters.
	Params map[string]string `json:"params,omitempty"`
}

// Activity is what Status shows of an activity.
type Activity struct {
	ID         string     `json:"activity_exec_id"`
	Name       string     `json:"activity_name"`
	State      string     `json:"state"`
	Reason     string     `json:"reason,omitempty"`
	DependsOn  []string   `json:"depends_on,omitempty"`
	Depth      int        `json:"depth"`
	Started    *time.Time `json:"start_time,omitempty"`
	Ended      *time.Time `json:"end_time,omitempty"`
	Seconds    *float64   `json:"duration_seconds,omitempty"`
	Attempt    int        `json:"attempt"`
	Host       string     `json:"host,omitempty"`
	PID        int        `json:"pid,omitempty"`
	LaunchedAs string     `json:"launched_as,omitempty"`
	ExitCode   *int       `json:"exit_code,omitempty"`
	Signal     string     `json:"signal,omitempty"`
	StderrTail string     `json:"stderr_tail,omitempty"`
	// HeartbeatAge is the age of the last heartbeat of a RUNNING activity.
	HeartbeatAge *float64 `json:"last_heartbeat_age_seconds,omitempty"`
	// Rejected lists the Simple Lambda API's events a processor refused.
	Rejected []RejectedEvent `json:"rejected_events,omitempty"`
	ActivityData
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
	return Workflow{ID: w.WorkflowExecID, Name: w.WorkflowName, State: string(w.State), Reason: w.Reason,
		RequestID: w.WorkflowRequestID, Source: w.Source, Started: timePtr(w.StartTime), Ended: timePtr(w.EndTime),
		Seconds: seconds(w.StartTime, end), Expires: timePtr(w.Expires), Params: viewParams(w.Params)}
}

// Load reads an execution and lays its activities out as the DAG:
// dependencies before dependents, each indented by its depth.
func Load(ctx context.Context, st state.Store, id string, now time.Time) (*Status, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	acts, err := st.Activities(ctx, id)
	if err != nil {
		return nil, err
	}
	byName := map[string]*state.ActivityExec{}
	for _, a := range acts {
		byName[a.ActivityName] = a
	}
	order := make([]string, 0, len(acts))
	deps := map[string][]string{}
	if def, err := workflow.ParseStored(wf.Definition); err == nil {
		for _, n := range def.Names() {
			if byName[n] != nil {
				order = append(order, n)
				deps[n] = def.Activities[n].DependsOn
			}
		}
	}
	if len(order) != len(acts) { // no usable definition: the items' order
		order = order[:0]
		for _, a := range acts {
			order = append(order, a.ActivityName)
		}
	}
	depth := map[string]int{}
	for _, n := range order { // dependencies come first
		for _, up := range deps[n] {
			depth[n] = max(depth[n], depth[up]+1)
		}
	}
	s := &Status{Workflow: viewWorkflow(wf, now)}
	for _, n := range order {
		a := byName[n]
		end := a.EndTime
		if end.IsZero() && a.State == state.Running {
			end = now
		}
		v := Activity{ID: a.ActivityExecID, Name: n, State: string(a.State), Reason: a.Reason, DependsOn: deps[n],
			Depth: depth[n], Started: timePtr(a.StartTime), Ended: timePtr(a.EndTime), Seconds: seconds(a.StartTime, end),
			Attempt: a.Attempt, Host: a.Host, PID: a.PID, LaunchedAs: a.LaunchedAs, ExitCode: a.ExitCode,
			Signal: a.Signal, StderrTail: a.Error}
		if in, ok := st.(state.Inbox); ok {
			// Say which Simple Lambda API events were refused, even
			// those that never moved the activity. Failing to list them
			// does not fail the status.
			if evs, err := in.Events(ctx, a.ActivityExecID, time.Time{}); err == nil {
				for _, e := range evs {
					if e.Outcome.Result == state.OutcomeRejected {
						v.Rejected = append(v.Rejected, RejectedEvent{ID: e.ActivityEventID, Transition: e.Transition, Reason: e.Outcome.Reason})
					}
				}
			}
		}
		v.ActivityData = viewData(a, now)
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
	return s, nil
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
	return (time.Duration(*s * float64(time.Second))).Round(10 * time.Millisecond).String()
}

// WriteText writes the status for people.
func (s *Status) WriteText(w io.Writer) error {
	wf := s.Workflow
	fmt.Fprintf(w, "workflow %s  %s\n", wf.ID, wf.State)
	fmt.Fprintf(w, "  started %s UTC, ended %s, took %s\n", clock(wf.Started), clock(wf.Ended), took(wf.Seconds))
	if wf.Reason != "" {
		fmt.Fprintf(w, "  why: %s\n", wf.Reason)
	}
	if wf.Expires != nil {
		fmt.Fprintf(w, "  kept until %s UTC\n", clock(wf.Expires))
	}
	if wf.RequestID != "" || wf.Source != "" {
		fmt.Fprintf(w, "  request %s, from %s\n", orDash(wf.RequestID), orDash(wf.Source))
	}
	writeParams(w, wf.Params)
	fmt.Fprintln(w)
	// The columns are laid out by hand: the detail lines under a row
	// (why, stderr) must not widen them.
	header := []string{"ACTIVITY", "STATE", "STARTED (UTC)", "TOOK", "ATTEMPT", "WHERE", "EXIT", "HEARTBEAT"}
	rows := make([][]string, 0, len(s.Activities))
	for _, a := range s.Activities {
		where := a.LaunchedAs
		if a.Host != "" && a.PID > 0 && !strings.HasPrefix(a.LaunchedAs, "arn:") { // an ECS task says more than its container's pid
			where = fmt.Sprintf("%s pid %d", a.Host, a.PID)
		}
		exit := "-"
		if a.ExitCode != nil {
			exit = fmt.Sprint(*a.ExitCode)
			if a.Signal != "" {
				exit += " (" + a.Signal + ")"
			}
		}
		hb := "-"
		if a.HeartbeatAge != nil {
			hb = fmt.Sprintf("%s ago", time.Duration(*a.HeartbeatAge*float64(time.Second)).Round(time.Second))
		}
		attempt := "-"
		if a.Attempt > 0 {
			attempt = fmt.Sprint(a.Attempt)
		}
		rows = append(rows, []string{strings.Repeat("  ", a.Depth) + a.Name, a.State, clock(a.Started), took(a.Seconds), attempt, orDash(where), exit, hb})
	}
	widths := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-len([]rune(c))+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header)
	for i, a := range s.Activities {
		line(rows[i])
		indent := strings.Repeat("  ", a.Depth) + "  "
		ended := state.ActivityState(a.State).Terminal() && a.State != string(state.Completed)
		if ended && a.Reason != "" {
			fmt.Fprintf(w, "%swhy: %s\n", indent, a.Reason)
		}
		// A failed launch has no stderr: its error is the reason already shown.
		if tail := strings.TrimRight(a.StderrTail, "\n"); tail != "" && ended && !strings.HasSuffix(a.Reason, tail) {
			lines := strings.Split(tail, "\n")
			for _, l := range lines[max(0, len(lines)-5):] {
				fmt.Fprintf(w, "%sstderr: %s\n", indent, l)
			}
		}
		for _, e := range a.Rejected {
			fmt.Fprintf(w, "%srejected event %s (%s): %s\n", indent, e.Transition, e.ID, e.Reason)
		}
		a.ActivityData.writeText(w, indent)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// List reads executions, newest first.
func List(ctx context.Context, st state.Store, q state.WorkflowQuery, now time.Time) ([]Workflow, error) {
	wfs, err := st.Workflows(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Workflow, 0, len(wfs))
	for _, w := range wfs {
		out = append(out, viewWorkflow(w, now))
	}
	return out, nil
}

// WriteList writes a listing for people.
func WriteList(w io.Writer, rows []Workflow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKFLOW_EXEC_ID\tSTATE\tSTARTED (UTC)\tTOOK\tWHY")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.State, clock(r.Started), took(r.Seconds), r.Reason)
	}
	return tw.Flush()
}

// Stats are the counts and durations of one workflow's executions.
type Stats struct {
	Name        string         `json:"workflow_name"`
	Total       int            `json:"total"`
	ByState     map[string]int `json:"by_state"`
	SuccessRate *float64       `json:"success_rate,omitempty"` // completed / settled
	P50         *float64       `json:"duration_p50_seconds,omitempty"`
	P95         *float64       `json:"duration_p95_seconds,omitempty"`
	Max         *float64       `json:"duration_max_seconds,omitempty"`
}

// Compute groups executions by workflow name. Durations are those of the
// executions that completed.
func Compute(wfs []*state.WorkflowExec) []Stats {
	by := map[string]*Stats{}
	durations := map[string][]float64{}
	for _, w := range wfs {
		s := by[w.WorkflowName]
		if s == nil {
			s = &Stats{Name: w.WorkflowName, ByState: map[string]int{}}
			by[w.WorkflowName] = s
		}
		s.Total++
		s.ByState[string(w.State)]++
		if w.State == state.WorkflowCompleted && !w.EndTime.IsZero() {
			durations[w.WorkflowName] = append(durations[w.WorkflowName], w.EndTime.Sub(w.StartTime).Seconds())
		}
	}
	var out []Stats
	for name, s := range by {
		settled := s.ByState[string(state.WorkflowCompleted)] + s.ByState[string(state.WorkflowFailed)] + s.ByState[string(state.WorkflowCancelled)]
		if settled > 0 {
			r := float64(s.ByState[string(state.WorkflowCompleted)]) / float64(settled)
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
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", s.Name, s.Total,
			s.ByState[string(state.WorkflowCompleted)], s.ByState[string(state.WorkflowFailed)],
			s.ByState[string(state.WorkflowCancelled)], s.ByState[string(state.WorkflowRunning)]+s.ByState[string(state.WorkflowRequested)],
			rate, took(s.P50), took(s.P95), took(s.Max))
	}
	return tw.Flush()
}
