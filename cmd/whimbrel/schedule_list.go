package main

import (
	"context"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/schedule"
)

// ScheduleListCmd is `whimbrel schedule list`.
type ScheduleListCmd struct {
	cli.StoreFlags
	JSON bool `name:"json" help:"Print JSON for scripts."`
}

// Run lists the schedules.
func (c *ScheduleListCmd) Run(g *Globals, k *kong.Context) error {
	return withSchedules(g, k, c.StoreFlags, reads, func(ctx context.Context, st schedule.Store) error {
		views, err := schedule.List(ctx, st)
		if err != nil {
			return err
		}
		if c.JSON {
			return writeJSON(k.Stdout, views)
		}
		return schedule.WriteList(k.Stdout, views)
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
		v, err := schedule.Show(ctx, st, c.Name)
		if err != nil {
			return err
		}
		if c.JSON {
			return writeJSON(k.Stdout, v)
		}
		return schedule.WriteShow(k.Stdout, v)
	})
}
