package schedule

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// View is a schedule with its last run or its run log, as `whimbrel
// schedule list` and `show` print it (without its definition, which is
// long, nor its raw run log).
type View struct {
	*state.Schedule
	LastRun *RunStatus `json:"last_run,omitempty"`
	// LastError is why the latest fire time failed to start (see
	// Failing), or else the last run's error.
	LastError string `json:"last_error,omitempty"`
	// Failing is the latest fire time whose run failed to start, when no
	// later one started (see Failing).
	Failing *state.ScheduleRun `json:"failing,omitempty"`
	Log     []RunStatus        `json:"run_log,omitempty"`
}

// List reads every schedule with its last run. A schedule that cannot be
// decoded is reported by the store (once, with its key) and left out; the
// others are listed.
func List(ctx context.Context, st Store) ([]View, error) {
	all, err := st.Schedules(ctx)
	if _, err = state.Skipped(err); err != nil {
		return nil, err
	}
	views := []View{} // [] rather than null for scripts
	for _, s := range all {
		v := View{Schedule: s}
		if r, ok, err := LastRun(ctx, st, s); err != nil {
			return nil, err
		} else if ok {
			v.LastRun = &r
		}
		v.LastError, v.Failing = LastError(s, v.LastRun), Failing(s)
		v.Params = ShownParams(s)
		v.Definition = ""
		views = append(views, v)
	}
	return views, nil
}

// Show reads schedule name with its run log.
func Show(ctx context.Context, st Store, name string) (View, error) {
	s, err := st.GetSchedule(ctx, name)
	if err != nil {
		return View{}, err
	}
	runs, err := Runs(ctx, st, s)
	if err != nil {
		return View{}, err
	}
	v := View{Schedule: s, Log: runs, Failing: Failing(s)}
	s.Params = ShownParams(s)
	if last, ok, err := LastRun(ctx, st, s); err != nil {
		return View{}, err
	} else if ok {
		v.LastError = LastError(s, &last)
	} else {
		v.LastError = LastError(s, nil)
	}
	v.Runs = nil
	return v, nil
}

// WriteList writes the schedules as a table.
func WriteList(out io.Writer, views []View) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tWORKFLOW\tTRIGGER\tNEXT\tLAST FIRE\tLAST RUN\tSTATE\tLAST ERROR")
	for _, v := range views {
		id, st, msg := "-", "-", v.LastError
		if r := v.LastRun; r != nil {
			id, st = r.WorkflowExecID, r.State.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(v.Name), clean(v.WorkflowName), clean(trigger(v.Schedule)),
			DescribeNext(v.Schedule), ftime(v.LastFire), clean(id), st, clean(msg))
	}
	return w.Flush()
}

// WriteShow writes a schedule and its run log for people.
func WriteShow(out io.Writer, v View) error {
	s, runs := v.Schedule, v.Log
	fmt.Fprintf(out, "schedule %s: %s, starts %s, catch-up %s (at most %d)\n%s; start %s, end %s\n",
		clean(s.Name), clean(trigger(s)), clean(s.WorkflowName), s.Catchup, s.MaxCatchup, describeNext(s, v.Failing), ftime(s.Start), ftime(s.End))
	if len(s.Params) > 0 {
		fmt.Fprintf(out, "params: %s\n", clean(paramList(s.Params)))
	}
	if v.LastError != "" {
		fmt.Fprintf(out, "last error: %s\n", clean(v.LastError))
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FIRE\tRUN\tSTATE\tFIRED AT\tENDED\tERROR / NOTE")
	for _, r := range runs {
		id, st := r.WorkflowExecID, r.State.String()
		switch {
		case r.Failed():
			id, st = "-", "NOT STARTED"
		case id == "":
			id, st = "-", "SKIPPED"
		case r.Missing:
			st = "(expired)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", ftime(r.Fire), clean(id), st, ftime(r.At), ftime(r.EndTime),
			clean(firstOf(r.Error, r.Note)))
	}
	return w.Flush()
}

// DescribeNext says when a schedule fires next.
func DescribeNext(s *state.Schedule) string { return describeNext(s, Failing(s)) }

// describeNext says when a schedule fires next, given the fire time whose
// run is failing to start (nil: none).
func describeNext(s *state.Schedule, failing *state.ScheduleRun) string {
	switch {
	case s.Paused:
		return "paused"
	case s.After != "":
		return fmt.Sprintf("after every %d COMPLETED %s (%d counted)", s.Threshold, s.After, s.Tokens%s.Threshold)
	case s.NextFire.IsZero():
		return "no more fire times"
	}
	if f := failing; f != nil && !GaveUp(*f) {
		return fmt.Sprintf("retrying fire %s (%s)", f.Fire.UTC().Format(time.RFC3339), retryWhen(*f))
	}
	return "next fire " + s.NextFire.Format(time.RFC3339)
}

func retryWhen(r state.ScheduleRun) string {
	if r.RetryAt.IsZero() {
		return "at the next tick"
	}
	return "next try " + r.RetryAt.UTC().Format(time.RFC3339)
}

// paramList is k=v, ..., sorted by name.
func paramList(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

// Describe names a schedule, its trigger and its workflow in one line,
// with nothing a terminal would act on.
func Describe(s *state.Schedule) string {
	return clean(fmt.Sprintf("schedule %s (%s, starts %s)", s.Name, trigger(s), s.WorkflowName))
}

func trigger(s *state.Schedule) string {
	switch {
	case s.Cron != "":
		return fmt.Sprintf("cron %q %s", s.Cron, s.TimeZone)
	case s.Every > 0:
		return "every " + s.Every.String()
	}
	return fmt.Sprintf("after %s ×%d", s.After, s.Threshold)
}

// clean keeps text from stderr tails from moving the terminal's cursor.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}

func ftime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
