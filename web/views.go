package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// unrecordedExitWait is how long a CANCELLED_RUNNING activity whose exit is
// not recorded keeps its execution from counting as final: its wrapper may
// still record how the command ended (within its record timeout).
const unrecordedExitWait = 10 * time.Minute

// look is how a state is shown: a CSS class from a fixed set, and an icon,
// so that states differ without colour too.
type look struct{ Class, Icon string }

// unknownLook shows what is not one of the contract's states (a raw item's).
var unknownLook = look{"unknown", "?"}

// activityLooks has a look for every activity state (a test walks
// state.ActivityStates and the stylesheet).
var activityLooks = map[state.ActivityState]look{
	state.Requested:        {"pending", "○"},
	state.Ready:            {"ready", "◔"},
	state.Queued:           {"queued", "◑"},
	state.Preparing:        {"queued", "◕"},
	state.Running:          {"running", "▶"},
	state.Completed:        {"completed", "✓"},
	state.Failed:           {"failed", "✗"},
	state.TimedOut:         {"failed", "⌛"},
	state.Cancelled:        {"cancelled", "⊘"},
	state.CancelledRunning: {"cancelled", "⊗"},
}

// workflowLooks shows each workflow state as the activity state of the
// same meaning.
var workflowLooks = map[state.WorkflowState]look{
	state.WorkflowRequested: {"pending", "○"},
	state.WorkflowRunning:   {"running", "▶"},
	state.WorkflowCompleted: {"completed", "✓"},
	state.WorkflowFailed:    {"failed", "✗"},
	state.WorkflowCancelled: {"cancelled", "⊘"},
}

func activityLook(s state.ActivityState) look {
	if l, ok := activityLooks[s]; ok {
		return l
	}
	return unknownLook
}

func workflowLook(s state.WorkflowState) look {
	if l, ok := workflowLooks[s]; ok {
		return l
	}
	return unknownLook
}

// activityRow is an activity as inspect gives it, with what the page adds.
// The page never computes ages against the clock: it renders absolute
// times, which the page's script turns into ages, so a page whose
// execution did not change reads the same and its ETag holds.
type activityRow struct {
	*inspect.Activity
	look
	Running   bool
	Took      string // for one that ended
	Where     string
	Exit      string
	Heartbeat *time.Time // the last heartbeat (or start) of a running activity
	Stderr    string
	// OutputText and ProgressText are the command's output and latest
	// progress, as text.
	OutputText, ProgressText string
	// ShowReason: the reason says something (why it waits, why it ended
	// badly), not what its state says already.
	ShowReason bool
	// AttemptTxt is the attempt column: "2 of 3" under a retry policy.
	AttemptTxt string
	Earlier    []attemptRow // the attempts before this one, first first
	// Label is the state as the page shows it: SKIPPED, CANCELLED (rule)
	// and finally activities are told apart (control.go).
	Label string
}

// attemptRow is an earlier attempt of an activity, as its row shows it.
type attemptRow struct {
	inspect.Attempt
	look
	Took   string
	Where  string
	Exit   string
	Stderr string
}

func attemptText(n, of int) string {
	switch {
	case n <= 0:
		return ""
	case of > 1:
		return fmt.Sprintf("%d of %d", n, of)
	}
	return fmt.Sprint(n)
}

func newActivityRow(a *inspect.Activity, readAt time.Time) *activityRow {
	r := &activityRow{Activity: a, look: activityLook(a.State), Running: a.State == state.Running}
	if a.Ended != nil {
		r.Took = took(a.Seconds)
	}
	r.Where = a.LaunchedAs
	if a.Host != "" && a.PID > 0 {
		r.Where = fmt.Sprintf("%s pid %d", a.Host, a.PID)
		// A local launch is named by the same pid: said once is enough.
		switch a.LaunchedAs {
		case "", fmt.Sprintf("pid:%d", a.PID):
		case fmt.Sprintf("inline:%d", a.PID):
			r.Where += " (inline)"
		default:
			r.Where += " (" + a.LaunchedAs + ")"
		}
	}
	if a.ExitCode != nil {
		r.Exit = fmt.Sprint(*a.ExitCode)
		if a.Signal != "" {
			r.Exit += " (" + a.Signal + ")"
		}
	} else if a.Signal != "" {
		r.Exit = a.Signal
	}
	if a.HeartbeatAge != nil {
		// inspect computed the age against readAt; undo it, to the store's
		// precision, to get the instant.
		t := readAt.Add(-time.Duration(*a.HeartbeatAge * float64(time.Second))).Round(state.Precision).UTC()
		r.Heartbeat = &t
	}
	r.Stderr = strings.TrimRight(a.StderrTail, "\n")
	r.OutputText = string(a.Output)
	if len(a.Progress) > 0 {
		r.ProgressText = string(a.Progress)
		var line string
		if json.Unmarshal(a.Progress, &line) == nil {
			r.ProgressText = line
		}
	}
	r.ShowReason = a.Reason != "" && a.State != state.Completed && a.State != state.Running
	controlRow(r) // control.go
	r.AttemptTxt = attemptText(a.Attempt, a.MaxAttempts)
	for _, e := range a.Earlier {
		ar := attemptRow{Attempt: e, look: activityLook(e.State), Stderr: strings.TrimRight(e.StderrTail, "\n")}
		if e.Started != nil && e.Ended != nil {
			s := e.Ended.Sub(*e.Started).Seconds()
			ar.Took = took(&s)
		}
		if e.Host != "" && e.PID > 0 {
			ar.Where = fmt.Sprintf("%s pid %d", e.Host, e.PID)
		} else {
			ar.Where = e.Host
		}
		if e.ExitCode != nil {
			ar.Exit = fmt.Sprint(*e.ExitCode)
		}
		r.Earlier = append(r.Earlier, ar)
	}
	return r
}

func took(s *float64) string {
	if s == nil {
		return ""
	}
	d := time.Duration(*s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// workflowView is one execution's page.
type workflowView struct {
	ID       string
	Status   *inspect.Status
	Workflow look
	Took     string
	Rows     []*activityRow
	DAG      dag
	Counts   []stateCount
	Problem  *problem // the execution could not be read
	Actions  bool
	CSRF     string
	Final    bool       // nothing about it can change any more
	Params   *runParams // nil: none, or not read
	// RerunOf is the execution this one reruns; Reruns are the reruns of
	// this one (its redrive among them), newest first.
	RerunOf string
	Reruns  []string
}

type stateCount struct {
	State state.ActivityState
	look
	N int
}

// problem is why something could not be shown, for people.
type problem struct {
	Status int
	Title  string
	Detail string
}

func problemOf(err error, what string) *problem {
	var ie *state.DecodeError
	switch {
	case errors.Is(err, state.ErrNotFound):
		return &problem{404, "Not found", fmt.Sprintf("There is no %s. It may have expired, or the store or table prefix is not the one it was started on.", what)}
	case errors.Is(err, ErrSlowStore), errors.Is(err, context.DeadlineExceeded):
		return &problem{504, "The store is slow", fmt.Sprintf("The store did not answer in time while reading %s. The page keeps trying.", what)}
	case errors.As(err, &ie):
		return &problem{502, "An item cannot be read", fmt.Sprintf("Reading %s met an item Whimbrel cannot decode: %v", what, err)}
	}
	return &problem{500, "The store answered with an error", fmt.Sprintf("Reading %s failed: %v", what, err)}
}

// final reports whether an execution can no longer change.
func final(s *inspect.Status, now time.Time) bool {
	if !s.Workflow.State.Terminal() {
		return false
	}
	if s.Workflow.Expires != nil && !now.Before(*s.Workflow.Expires) {
		return false
	}
	for _, a := range s.Activities {
		if !a.State.Terminal() {
			return false
		}
		if a.State == state.CancelledRunning && a.ExitCode == nil && a.Signal == "" && (a.Ended == nil || now.Sub(*a.Ended) < unrecordedExitWait) {
			return false
		}
	}
	return true
}

// status is one read of an execution.
type status struct {
	s      *inspect.Status
	readAt time.Time
}

func (s *Server) loadStatus(ctx context.Context, id string) (*status, error) {
	if _, err := state.WorkflowNameOf(id); err != nil {
		// Not an ID any execution can have: nothing to read.
		return nil, fmt.Errorf("read workflow %q: %w", id, &state.NotFoundError{Kind: "workflow execution", ID: id})
	}
	v, _, err := s.reads.get(ctx, "status "+id, func(ctx context.Context) (any, bool, error) {
		now := s.opts.Now()
		// Child workflows are expanded in place (docs/sub-workflows.md).
		st, err := inspect.LoadTree(ctx, s.opts.Store, id, now)
		if err != nil {
			return nil, false, fmt.Errorf("read workflow %s: %w", id, err)
		}
		return &status{s: st, readAt: now}, final(st, now), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*status), nil
}

func (s *Server) workflowView(ctx context.Context, id string, csrf bool) *workflowView {
	v := &workflowView{ID: id, Actions: s.opts.AllowActions}
	if csrf {
		v.CSRF = s.keys.csrf
	}
	st, err := s.loadStatus(ctx, id)
	if err != nil {
		v.Problem = problemOf(err, "workflow execution "+id)
		return v
	}
	v.Status = st.s
	v.Workflow = workflowLook(st.s.Workflow.State)
	if st.s.Workflow.Ended != nil {
		v.Took = took(st.s.Workflow.Seconds)
	}
	v.Rows = activityRows(st.s.Activities, st.readAt)
	v.DAG = layout(v.Rows)
	v.Final = final(st.s, st.readAt)
	// The params are a second read, made once per execution; if it fails
	// the page shows the rest, and tries again on its next refresh.
	if p, err := s.loadParams(ctx, id); err == nil && !p.empty() {
		v.Params = p
	} else if err != nil {
		v.Final = false
	}
	v.RerunOf, _ = workflow.RerunOf(st.s.Workflow.Source)
	if ids, err := s.loadReruns(ctx, st.s.Workflow); err == nil {
		v.Reruns = ids
	} else {
		v.Final = false // tried again at the next refresh
	}
	seen := map[state.ActivityState]*stateCount{}
	for _, r := range v.Rows {
		if c := seen[r.State]; c != nil {
			c.N++
			continue
		}
		v.Counts = append(v.Counts, stateCount{State: r.State, look: r.look, N: 1})
		seen[r.State] = &v.Counts[len(v.Counts)-1]
	}
	return v
}

// workflowStates are the states the listing filters by: every one, as
// the address and the filter's options spell them.
var workflowStates = func() []string {
	var out []string
	for _, s := range state.WorkflowStates {
		out = append(out, s.String())
	}
	return out
}()

// listQuery is what the listing shows: from the address, checked.
type listQuery struct {
	Name  string
	State string
	Since string // "1h", "24h", "7d", "30d" or "all"
	Page  int    // from 0
}

// sinces are the listing's time filters.
var sinces = []struct{ Value, Label string }{
	{"1h", "last hour"}, {"24h", "last 24 hours"}, {"7d", "last 7 days"}, {"30d", "last 30 days"}, {"all", "any time"},
}

// pageSize is how many executions a page of the listing shows.
const pageSize = 50

type listRow struct {
	inspect.Workflow
	look
	Took string
}

type listView struct {
	Query    listQuery
	Rows     []listRow
	Problem  *problem
	Next     string // the address of the next page, if any
	Prev     string
	States   []string
	Sinces   []struct{ Value, Label string }
	LiveSrc  string
	Filtered bool
}

func (s *Server) loadList(ctx context.Context, q listQuery) ([]inspect.Workflow, error) {
	sq := state.WorkflowQuery{State: state.WorkflowState(q.State), Name: q.Name}
	if q.Page >= 0 {
		// The store pages from the newest, so page n reads its n earlier
		// pages too, and one more row to know whether a next page exists.
		sq.Limit = (q.Page+1)*pageSize + 1
	}
	key := fmt.Sprintf("list %q %q %q %d", q.Name, q.State, q.Since, sq.Limit)
	v, _, err := s.reads.get(ctx, key, func(ctx context.Context) (any, bool, error) {
		now := s.opts.Now()
		if d, ok := sinceOf(q.Since); ok {
			sq.Since = now.Add(-d)
		}
		rows, err := inspectList(ctx, s.opts.Store, sq, now)
		return rows, false, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]inspect.Workflow), nil
}

func sinceOf(s string) (time.Duration, bool) {
	switch s {
	case "1h":
		return time.Hour, true
	case "24h":
		return 24 * time.Hour, true
	case "7d":
		return 7 * 24 * time.Hour, true
	case "30d":
		return 30 * 24 * time.Hour, true
	}
	return 0, false
}

// inspectList is inspect.List as whimbrel list --json prints it: never null.
func inspectList(ctx context.Context, st inspect.Lister, q state.WorkflowQuery, now time.Time) ([]inspect.Workflow, error) {
	rows, err := inspect.List(ctx, st, q, now)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	if rows == nil {
		rows = []inspect.Workflow{}
	}
	return rows, nil
}
