package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// ScheduleListCmd is `whimbrel schedule list`.
type ScheduleListCmd struct {
	cli.StoreFlags
	JSON bool `name:"json" help:"Print JSON for scripts."`
}

// scheduleView is a schedule with its last run, as list and show print it.
type scheduleView struct {
	*state.Schedule
	LastRun *schedule.RunStatus  `json:"last_run,omitempty"`
	Log     []schedule.RunStatus `json:"run_log,omitempty"`
}

// Run lists the schedules.
func (c *ScheduleListCmd) Run(g *Globals, k *kong.Context) error {
	return withSchedules(g, k, c.StoreFlags, reads, func(ctx context.Context, st schedule.Store) error {
		all, err := st.Schedules(ctx)
		// A schedule that cannot be decoded is reported by the store (once,
		// with its key) and left out; the others are listed.
		if _, err = state.Skipped(err); err != nil {
			return err
		}
		views := []scheduleView{} // [] rather than null for scripts
		for _, s := range all {
			v := scheduleView{Schedule: s}
			if r, ok, err := schedule.LastRun(ctx, st, s); err != nil {
				return err
			} else if ok {
				v.LastRun = &r
			}
			v.Definition = ""
			views = append(views, v)
		}
		if c.JSON {
			return writeJSON(k.Stdout, views)
		}
		w := tabwriter.NewWriter(k.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tWORKFLOW\tTRIGGER\tNEXT\tLAST FIRE\tLAST RUN\tSTATE\tERROR")
		for _, v := range views {
			id, st, msg := "-", "-", ""
			if r := v.LastRun; r != nil {
				id, st, msg = r.WorkflowExecID, r.State, r.Error
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(v.Name), clean(v.WorkflowName), clean(trigger(v.Schedule)),
				describeNext(v.Schedule), ftime(v.LastFire), clean(id), st, clean(msg))
		}
		return w.Flush()
	})
}

// ScheduleShowCmd is `whimbrel schedule show`.
type ScheduleShowCmd struct {
	cli.StoreFlags
	Name string `arg:"" name:"name" help:"The schedule."`
	JSON bool   `name:"json" help:"Print JSON for scripts."`
}

// Run shows the schedule and its run log.
func (c *ScheduleShowCmd) Run(g *Globals, k *kong.Context) error {
	return withSchedules(g, k, c.StoreFlags, reads, func(ctx context.Context, st schedule.Store) error {
		s, err := st.GetSchedule(ctx, c.Name)
		if err != nil {
			return err
		}
		runs, err := schedule.Runs(ctx, st, s)
		if err != nil {
			return err
		}
		v := scheduleView{Schedule: s, Log: runs}
		v.Runs = nil
		if c.JSON {
			return writeJSON(k.Stdout, v)
		}
		fmt.Fprintf(k.Stdout, "schedule %s: %s, starts %s, catch-up %s (at most %d)\n%s; start %s, end %s\n\n",
			clean(s.Name), clean(trigger(s)), clean(s.WorkflowName), s.Catchup, s.MaxCatchup, describeNext(s), ftime(s.Start), ftime(s.End))
		w := tabwriter.NewWriter(k.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "FIRE\tRUN\tSTATE\tFIRED AT\tENDED\tERROR / NOTE")
		for _, r := range runs {
			id, st := r.WorkflowExecID, r.State
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
	})
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
