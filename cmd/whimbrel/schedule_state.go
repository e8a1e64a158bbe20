package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// withSchedules opens the store as a schedule.Store and runs fn.
func withSchedules(g *Globals, k *kong.Context, f cli.StoreFlags, a access, fn func(context.Context, schedule.Store) error) error {
	return withSession(g, k, f, a, func(se *session) error {
		ss, ok := se.st.(schedule.Store)
		if !ok {
			return fmt.Errorf("the store %T keeps no schedules", se.st)
		}
		err := fn(se.ctx, ss)
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("%w (whimbrel schedule list shows the schedules under prefix %q)", err, f.Prefix)
		}
		return err
	})
}

// ScheduleTickCmd is `whimbrel schedule tick`.
type ScheduleTickCmd struct {
	cli.StoreFlags
	Now rfc3339 `name:"now" placeholder:"RFC3339" help:"Fire what is due at this time instead of now (backfills, tests); it never moves a schedule back. The run log's \"fired at\" is still the real time."`
}

// Run fires everything due once.
func (c *ScheduleTickCmd) Run(g *Globals, k *kong.Context) error {
	now := c.Now.Time
	if now.IsZero() {
		now = time.Now()
	}
	return withSchedules(g, k, c.StoreFlags, writes, func(ctx context.Context, st schedule.Store) error {
		r, err := schedule.Tick(ctx, st, now, g.Logger("whimbrel", k.Stderr).Named("schedule"))
		fmt.Fprintf(k.Stdout, "due %d, started %d, skipped %d, counted %d, failed to start %d\n", r.Due, r.Started, r.Skipped, r.Counted, r.Failed)
		return err
	})
}

// ScheduleNameCmd is `whimbrel schedule pause|resume|delete NAME`.
type ScheduleNameCmd struct {
	cli.StoreFlags
	Name string `arg:"" name:"name" help:"The schedule."`
}

// Run pauses, resumes or deletes, as the command's name says.
func (c *ScheduleNameCmd) Run(g *Globals, k *kong.Context) error {
	return withSchedules(g, k, c.StoreFlags, writes, func(ctx context.Context, st schedule.Store) error {
		var err error
		switch verb := k.Selected().Name; verb {
		case "pause":
			if err = schedule.Pause(ctx, st, c.Name); err == nil {
				fmt.Fprintf(k.Stdout, "schedule %s paused\n", c.Name)
			}
		case "resume":
			if err = schedule.Resume(ctx, st, c.Name, time.Now()); err == nil {
				fmt.Fprintf(k.Stdout, "schedule %s resumed\n", c.Name)
			}
		default:
			var s *state.Schedule
			if s, err = schedule.Delete(ctx, st, c.Name); err == nil {
				fmt.Fprintf(k.Stdout, "deleted %s; the runs it started stay\n", schedule.Describe(s))
			}
		}
		return err
	})
}
