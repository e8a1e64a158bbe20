package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// scheduleJSON is a schedule as the API answers it: what `whimbrel
// schedule list --json` (last_run) and `whimbrel schedule show --json`
// (run_log, each line with its run's state and error) print.
type scheduleJSON struct {
	*state.Schedule
	LastRun   *schedule.RunStatus  `json:"last_run,omitempty"`
	LastError string               `json:"last_error,omitempty"` // see schedule.LastError
	Failing   *state.ScheduleRun   `json:"failing,omitempty"`    // see schedule.Failing
	Log       []schedule.RunStatus `json:"run_log,omitempty"`
}

// errNoSchedules is why a store that keeps no schedules has none to show.
var errNoSchedules = errors.New("this store keeps no schedules")

// schedules is the store's schedules, when it keeps them.
func (s *Server) schedules() (scheduleStore, bool) {
	ss, ok := s.opts.Store.(scheduleStore)
	return ss, ok
}

// loadSchedules reads every schedule with its last run, shared by the
// pages and the API for the refresh interval.
func (s *Server) loadSchedules(ctx context.Context) ([]scheduleJSON, error) {
	ss, ok := s.schedules()
	if !ok {
		return nil, errNoSchedules
	}
	v, _, err := s.reads.get(ctx, "schedules", func(ctx context.Context) (any, bool, error) {
		all, err := ss.Schedules(ctx)
		if err != nil {
			return nil, false, fmt.Errorf("list the schedules: %w", err)
		}
		out := []scheduleJSON{} // [] rather than null
		for _, sc := range all {
			v := scheduleJSON{Schedule: sc}
			for _, l := range sc.Runs {
				if l.WorkflowExecID == "" {
					continue
				}
				runs, err := runStatuses(ctx, ss, []state.ScheduleRun{l})
				if err != nil {
					return nil, false, fmt.Errorf("schedule %s: %w", sc.Name, err)
				}
				v.LastRun = &runs[0]
				break
			}
			v.LastError, v.Failing = schedule.LastError(sc, v.LastRun), schedule.Failing(sc)
			sc.Params = schedule.ShownParams(sc)
			sc.Definition = ""
			out = append(out, v)
		}
		return out, false, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]scheduleJSON), nil
}

// loadSchedule reads one schedule with its run log, each run with its
// state and error.
func (s *Server) loadSchedule(ctx context.Context, name string) (scheduleJSON, error) {
	ss, ok := s.schedules()
	if !ok {
		return scheduleJSON{}, errNoSchedules
	}
	v, _, err := s.reads.get(ctx, "schedule "+name, func(ctx context.Context) (any, bool, error) {
		sc, err := ss.GetSchedule(ctx, name)
		if err != nil {
			return nil, false, fmt.Errorf("read schedule %s: %w", name, err)
		}
		runs, err := runStatuses(ctx, ss, sc.Runs)
		if err != nil {
			return nil, false, fmt.Errorf("schedule %s: %w", name, err)
		}
		var last *schedule.RunStatus
		for i := range runs {
			if runs[i].WorkflowExecID != "" {
				last = &runs[i]
				break
			}
		}
		v := scheduleJSON{Schedule: sc, Log: runs, LastError: schedule.LastError(sc, last), Failing: schedule.Failing(sc)}
		sc.Params = schedule.ShownParams(sc)
		sc.Definition, sc.Runs = "", nil
		return v, false, nil
	})
	if err != nil {
		return scheduleJSON{}, err
	}
	return v.(scheduleJSON), nil
}

// runStatuses reads what became of each run, as schedule.Runs does; a run
// whose items cannot be decoded is shown as such, with why, instead of
// failing the whole page.
func runStatuses(ctx context.Context, st workflow.Reader, runs []state.ScheduleRun) ([]schedule.RunStatus, error) {
	out := make([]schedule.RunStatus, 0, len(runs))
	for _, r := range runs {
		got, err := schedule.Runs(ctx, st, &state.Schedule{Runs: []state.ScheduleRun{r}})
		var ie *state.DecodeError
		switch {
		case errors.As(err, &ie):
			out = append(out, schedule.RunStatus{ScheduleRun: r, Error: "cannot be read: " + err.Error()})
		case err != nil:
			return nil, err
		default:
			out = append(out, got...)
		}
	}
	return out, nil
}

func (s *Server) apiSchedules(w http.ResponseWriter, r *http.Request) {
	v, err := s.loadSchedules(r.Context())
	if errors.Is(err, errNoSchedules) {
		writeJSONError(w, http.StatusNotFound, err.Error())
		return
	}
	if err != nil {
		p := problemOf(err, "the schedules")
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, v)
}

func (s *Server) apiSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, err := s.loadSchedule(r.Context(), name)
	switch {
	case errors.Is(err, errNoSchedules):
		writeJSONError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, state.ErrNotFound):
		writeJSONError(w, http.StatusNotFound, "no schedule "+name)
		return
	case err != nil:
		p := problemOf(err, "schedule "+name)
		writeJSONError(w, p.Status, p.Detail)
		return
	}
	writeJSON(w, r, http.StatusOK, v)
}

// runRow is a line of a run log, as the pages show it.
type runRow struct {
	schedule.RunStatus
	look
	Fire, At, Ended *time.Time
	Label           string // the run's state, or what became of a fire time without one
}

func newRunRow(r schedule.RunStatus) runRow {
	v := runRow{RunStatus: r, Fire: timeOf(r.Fire), At: timeOf(r.At), Ended: timeOf(r.EndTime)}
	switch {
	case r.Failed():
		v.look, v.Label = look{"failed", "✗"}, "not started"
	case r.WorkflowExecID == "":
		v.look, v.Label = look{"pending", "↷"}, "skipped"
	case r.Missing:
		v.look, v.Label = look{"unknown", "∅"}, "expired"
	case r.State == "":
		v.look, v.Label = look{"unknown", "?"}, "unreadable"
	default:
		v.look, v.Label = workflowLook(r.State), r.State.String()
	}
	return v
}

func timeOf(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// scheduleRow is a schedule as the pages show it.
type scheduleRow struct {
	*state.Schedule
	Trigger            string
	When               string // when it fires next, in words, when not at a time
	NextFire, LastFire *time.Time
	Start, End, Set    *time.Time
	Last               *runRow
	LastError          string
	Params             []param
}

func newScheduleRow(v scheduleJSON) scheduleRow {
	sc := v.Schedule
	r := scheduleRow{Schedule: sc, NextFire: timeOf(sc.NextFire), LastFire: timeOf(sc.LastFire),
		Start: timeOf(sc.Start), End: timeOf(sc.End), Set: timeOf(sc.SetTime), LastError: v.LastError}
	switch {
	case sc.Cron != "" && sc.TimeZone != "":
		r.Trigger = fmt.Sprintf("cron %s (%s)", sc.Cron, sc.TimeZone)
	case sc.Cron != "":
		r.Trigger = "cron " + sc.Cron + " (UTC)"
	case sc.Every > 0:
		r.Trigger = "every " + sc.Every.String()
	default:
		r.Trigger = fmt.Sprintf("after every %d COMPLETED %s", max(sc.Threshold, 1), sc.After)
	}
	switch {
	case sc.Paused:
		r.When = "paused"
	case sc.After != "" && sc.Threshold > 0:
		r.When = fmt.Sprintf("after %d more COMPLETED %s", sc.Threshold-sc.Tokens%sc.Threshold, sc.After)
	case sc.After != "":
		r.When = "after the next COMPLETED " + sc.After
	case sc.NextFire.IsZero():
		r.When = "no more fire times"
	case v.Failing != nil && !schedule.GaveUp(*v.Failing):
		r.When = "retrying the fire time " + v.Failing.Fire.UTC().Format("2006-01-02 15:04:05")
		if !v.Failing.RetryAt.IsZero() {
			r.When += ", next try " + v.Failing.RetryAt.UTC().Format("2006-01-02 15:04:05")
		}
	}
	if v.LastRun != nil {
		lr := newRunRow(*v.LastRun)
		r.Last = &lr
	}
	for k, val := range sc.Params {
		r.Params = append(r.Params, param{Name: k, Value: val})
	}
	sort.Slice(r.Params, func(i, j int) bool { return r.Params[i].Name < r.Params[j].Name })
	return r
}

// param is one of a workflow's or a schedule's params.
type param struct{ Name, Value string }

// schedulesView is the page of the schedules.
type schedulesView struct {
	Rows    []scheduleRow
	Problem *problem
	None    bool // the store keeps no schedules
}

func (s *Server) schedulesView(r *http.Request) *schedulesView {
	v := &schedulesView{}
	all, err := s.loadSchedules(r.Context())
	switch {
	case errors.Is(err, errNoSchedules):
		v.None = true
	case err != nil:
		v.Problem = problemOf(err, "the schedules")
	}
	for _, sc := range all {
		v.Rows = append(v.Rows, newScheduleRow(sc))
	}
	return v
}

const schedulesLive = "/fragments/schedules"

func (s *Server) schedulesPage(w http.ResponseWriter, r *http.Request) {
	v := s.schedulesView(r)
	s.render(w, r, statusOf(v.Problem), "schedules.html", page{Title: "Schedules", LiveSrc: schedulesLive, View: v})
}

func (s *Server) schedulesFragment(w http.ResponseWriter, r *http.Request) {
	v := s.schedulesView(r)
	s.render(w, r, statusOf(v.Problem), "schedules-live", v)
}

// scheduleView is one schedule's page: what it is and its run log.
type scheduleView struct {
	Name     string
	Schedule *scheduleRow
	Runs     []runRow
	Problem  *problem
}

func (s *Server) scheduleView(r *http.Request, name string) *scheduleView {
	v := &scheduleView{Name: name}
	sc, err := s.loadSchedule(r.Context(), name)
	switch {
	case errors.Is(err, errNoSchedules):
		v.Problem = &problem{http.StatusNotFound, "Not found", "This store keeps no schedules."}
		return v
	case err != nil:
		v.Problem = problemOf(err, "schedule "+name)
		return v
	}
	row := newScheduleRow(sc)
	v.Schedule = &row
	for _, run := range sc.Log {
		v.Runs = append(v.Runs, newRunRow(run))
	}
	return v
}

func (s *Server) schedulePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v := s.scheduleView(r, name)
	p := page{Title: "Schedule " + name, LiveSrc: "/fragments/schedules/" + url.PathEscape(name), View: v}
	s.render(w, r, statusOf(v.Problem), "schedule.html", p)
}

func (s *Server) scheduleFragment(w http.ResponseWriter, r *http.Request) {
	v := s.scheduleView(r, r.PathValue("name"))
	s.render(w, r, statusOf(v.Problem), "schedule-live", v)
}
