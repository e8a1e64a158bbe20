package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// withSchedules opens the store as a schedule.Store and runs fn.
func withSchedules(g *Globals, k *kong.Context, f cli.StoreFlags, a access, fn func(context.Context, schedule.Store) error) error {
	se, err := open(g, k, f, a)
	if err != nil {
		return err
	}
	defer se.close()
	ss, ok := se.st.(schedule.Store)
	if !ok {
		return fmt.Errorf("the store %T keeps no schedules", se.st)
	}
	err = fn(se.ctx, ss)
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("%w (whimbrel schedule list shows the schedules under prefix %q)", err, f.Prefix)
	}
	return err
}

// ScheduleTickCmd is `whimbrel schedule tick`.
type ScheduleTickCmd struct {
	cli.StoreFlags
	Now string `name:"now" placeholder:"RFC3339" help:"Fire what is due at this time instead of now (backfills, tests); it never moves a schedule back."`
}

// Run fires everything due once.
func (c *ScheduleTickCmd) Run(g *Globals, k *kong.Context) error {
	now, err := parseTime("--now", c.Now)
	if err != nil {
		return err
	}
	if now.IsZero() {
		now = time.Now()
	}
	return withSchedules(g, k, c.StoreFlags, writes, func(ctx context.Context, st schedule.Store) error {
		r, err := schedule.Tick(ctx, st, now, g.Logger("whimbrel", k.Stderr).Named("schedule"))
		fmt.Fprintf(k.Stdout, "due %d, started %d, skipped %d, counted %d\n", r.Due, r.Started, r.Skipped, r.Counted)
		return err
	})
}

func describeNext(s *state.Schedule) string {
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
