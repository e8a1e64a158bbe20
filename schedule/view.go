package schedule

import (
	"context"
	"fmt"
	"io"
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
	LastRun *RunStatus  `json:"last_run,omitempty"`
	Log     []RunStatus `json:"run_log,omitempty"`
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
	v := View{Schedule: s, Log: runs}
	v.Runs = nil
	return v, nil
}

// WriteList writes the schedules as a table.
func WriteList(out io.Writer, views []View) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tWORKFLOW\tTRIGGER\tNEXT\tLAST FIRE\tLAST RUN\tSTATE\tERROR")
	for _, v := range views {
		id, st, msg := "-", "-", ""
		if r := v.LastRun; r != nil {
			id, st, msg = r.WorkflowExecID, r.State.String(), r.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(v.Name), clean(v.WorkflowName), clean(trigger(v.Schedule)),
			DescribeNext(v.Schedule), ftime(v.LastFire), clean(id), st, clean(msg))
	}
	return w.Flush()
}

// WriteShow writes a schedule and its run log for people.
func WriteShow(out io.Writer, v View) error {
	s, runs := v.Schedule, v.Log
	fmt.Fprintf(out, "schedule %s: %s, starts %s, catch-up %s (at most %d)\n%s; start %s, end %s\n\n",
		clean(s.Name), clean(trigger(s)), clean(s.WorkflowName), s.Catchup, s.MaxCatchup, DescribeNext(s), ftime(s.Start), ftime(s.End))
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "FIRE\tRUN\tSTATE\tFIRED AT\tENDED\tERROR / NOTE")
	for _, r := range runs {
		id, st := r.WorkflowExecID, r.State.String()
		switch {
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
func DescribeNext(s *state.Schedule) string {
	switch {
	case s.Paused:
		return "paused"
	case s.After != "":
		return fmt.Sprintf("after every %d COMPLETED %s (%d counted)", s.Threshold, s.After, s.Tokens%s.Threshold)
	case s.NextFire.IsZero():
		return "no more fire times"
	}
	return "next fire " + s.NextFire.Format(time.RFC3339)
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
