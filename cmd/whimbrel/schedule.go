package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/schedule"
)

// ScheduleCmd is `whimbrel schedule`.
type ScheduleCmd struct {
	Set    ScheduleSetCmd  `cmd:"" help:"Create or replace a schedule: NAME FILE and one trigger (--cron, --every or --after)."`
	List   ScheduleListCmd `cmd:"" help:"List the schedules: trigger, next fire, last fire, last run's ID, state and error."`
	Show   ScheduleShowCmd `cmd:"" help:"Show a schedule's run log: recent runs with state, times and error, and what catch-up skipped."`
	Pause  ScheduleNameCmd `cmd:"" help:"Stop a schedule firing."`
	Resume ScheduleNameCmd `cmd:"" help:"Fire a paused schedule again; the fire times it missed follow its --catchup rule."`
	Delete ScheduleNameCmd `cmd:"" help:"Delete a schedule (its runs stay)."`
	Tick   ScheduleTickCmd `cmd:"" help:"Fire everything due once, then exit (for cron, CI, or a Lambda on an EventBridge rule)."`
}

// ScheduleSetCmd is `whimbrel schedule set`.
type ScheduleSetCmd struct {
	cli.StoreFlags
	Name       string  `arg:"" name:"name" help:"The schedule's name; its runs' request IDs are NAME@<fire time>."`
	File       string  `arg:"" name:"file" help:"The workflow definition (YAML or JSON) it starts."`
	Cron       string  `name:"cron" placeholder:"EXPR" help:"5 cron fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, in --timezone."`
	Every      string  `name:"every" placeholder:"DURATION" help:"A fixed interval from --start (90s, 15m, 1h, 1d)."`
	After      string  `name:"after" placeholder:"WORKFLOW" help:"Start a run after every --threshold COMPLETED executions of WORKFLOW."`
	Threshold  *int    `name:"threshold" help:"With --after: completions per run (default 1)."`
	TimeZone   string  `name:"timezone" default:"UTC" help:"IANA time zone of --cron (Europe/Berlin, America/New_York)."`
	Catchup    string  `name:"catchup" enum:"all,latest,none" default:"all" help:"Missed fire times: all (oldest first, at most --max-catchup), latest, or none."`
	Overlap    string  `name:"overlap" enum:"skip,queue,allow,cancel-previous" default:"skip" help:"While the previous run still runs, a fire: skip (logged), queue (at most one waits), allow, or cancel-previous."`
	MaxCatchup int     `name:"max-catchup" default:"50" help:"With --catchup all: at most this many missed runs; the older are skipped, and the run log says so."`
	Start      rfc3339 `name:"start" placeholder:"RFC3339" help:"First possible fire time (default: now)."`
	End        rfc3339 `name:"end" placeholder:"RFC3339" help:"Last possible fire time (default: none)."`
	ParamFlags `embed:""`
}

// Run checks the schedule and writes it; bad input writes nothing and
// exits as a usage error.
func (c *ScheduleSetCmd) Run(g *Globals, k *kong.Context) error {
	spec := schedule.Spec{Name: c.Name, Cron: c.Cron, After: c.After, TimeZone: c.TimeZone,
		Catchup: c.Catchup, MaxCatchup: c.MaxCatchup, Overlap: c.Overlap, Start: c.Start.Time, End: c.End.Time}
	if c.Threshold != nil {
		if *c.Threshold < 1 {
			return &cli.UsageError{Msg: fmt.Sprintf("--threshold %d: give at least 1", *c.Threshold)}
		}
		spec.Threshold = *c.Threshold
	}
	if c.MaxCatchup < 1 {
		// The flag defaults to 50; 0 given on purpose is not "the default".
		return &cli.UsageError{Msg: fmt.Sprintf("--max-catchup %d: give at least 1", c.MaxCatchup)}
	}
	var err error
	if c.Every != "" {
		if spec.Every, err = definition.ParseDuration(c.Every); err != nil || spec.Every <= 0 {
			return &cli.UsageError{Msg: fmt.Sprintf("--every %q: give a positive duration such as 90s, 15m or 1d", c.Every)}
		}
	}
	if spec.Definition, err = load(c.File, k.Stderr); err != nil {
		return err
	}
	if spec.Params, err = c.bind(spec.Definition); err != nil {
		return err
	}
	return withSchedules(g, k, c.StoreFlags, writes, func(ctx context.Context, st schedule.Store) error {
		s, err := schedule.Set(ctx, st, spec, time.Now())
		if se := (*schedule.SpecError)(nil); errors.As(err, &se) {
			return &cli.UsageError{Msg: err.Error()}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(k.Stdout, "schedule %s set: %s\n", s.Name, schedule.DescribeNext(s))
		for _, w := range schedule.Warnings(s) {
			fmt.Fprintf(k.Stderr, "warning: schedule %s: %s\n", s.Name, w)
		}
		return nil
	})
}
