package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	_ "time/tzdata" // the binaries are static: they carry their own zone database
)

// parser reads the standard 5 fields and the descriptors (@hourly, @daily,
// @weekly, @monthly, @yearly). @every is refused: --every says that.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// clock computes the fire times of a time trigger.
//
// Cron expressions are matched against the wall clock of the time zone:
// every matching wall-clock time fires exactly once. When the clocks go
// back, a wall-clock time that happens twice fires at its first
// occurrence; when they go forward, a wall-clock time that does not happen
// fires when the gap ends (together with anything due at that instant, as
// one fire). So a job at 02:30 runs once every day of the year.
type clock struct {
	cron  cron.Schedule // nil for an interval
	loc   *time.Location
	every time.Duration
	start time.Time
	end   time.Time // zero: none
}

func parseCron(expr string) (cron.Schedule, error) {
	e := strings.TrimSpace(expr)
	switch {
	case e == "":
		return nil, fmt.Errorf("--cron is empty: give 5 fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly")
	case strings.HasPrefix(e, "@every"):
		return nil, fmt.Errorf("--cron %q: use --every for a fixed interval", expr)
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return nil, fmt.Errorf("--cron %q: give the time zone with --timezone", expr)
	}
	s, err := parser.Parse(e)
	if err != nil {
		return nil, fmt.Errorf("--cron %q is not a cron expression: %v", expr, err)
	}
	return s, nil
}

// next returns the first fire time strictly after t (and at or after the
// start, at or before the end), or the zero time if there is none.
func (c clock) next(t time.Time) time.Time {
	var f time.Time
	switch {
	case c.cron == nil && t.Before(c.start):
		f = c.start
	case c.cron == nil:
		f = c.start.Add((t.Sub(c.start)/c.every + 1) * c.every)
	case t.Before(c.start):
		f = c.nextCron(c.start.Add(-time.Nanosecond))
	default:
		f = c.nextCron(t)
	}
	if f.IsZero() || (!c.end.IsZero() && f.After(c.end)) {
		return time.Time{}
	}
	return f.UTC()
}

// nextCron walks the wall-clock matches from a little before t's wall time
// (a wall-clock time may map to an instant up to a few hours earlier or
// later) and returns the first whose instant is after t.
func (c clock) nextCron(t time.Time) time.Time {
	w := wall(t.In(c.loc))
	// Far from a change of offset, wall clock and instants move together;
	// near one, start early enough to meet the wall-clock times that map
	// after t.
	if from, to := t.In(c.loc).ZoneBounds(); t.Sub(from) < 26*time.Hour || (!to.IsZero() && to.Sub(t) < 26*time.Hour) {
		w = w.Add(-4 * time.Hour)
	}
	for i := 0; i < 1_000_000; i++ {
		w = c.cron.Next(w)
		if w.IsZero() {
			return time.Time{}
		}
		if u := instant(w, c.loc); u.After(t) {
			return u
		}
	}
	return time.Time{}
}

// wall is t's wall-clock reading, as a time in UTC.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the instant a wall-clock reading w (in UTC) fires at in loc:
// its first occurrence, or the end of the gap it falls in.
func instant(w time.Time, loc *time.Location) time.Time {
	guess := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	var best time.Time
	var offsets []int
	for _, d := range []time.Duration{-6 * time.Hour, 0, 6 * time.Hour} {
		_, off := guess.Add(d).Zone()
		offsets = append(offsets, off)
	}
	for _, off := range offsets {
		u := w.Add(-time.Duration(off) * time.Second)
		if wall(u.In(loc)).Equal(w) && (best.IsZero() || u.Before(best)) {
			best = u
		}
	}
	if !best.IsZero() {
		return best.UTC()
	}
	// In a gap: the clocks jumped over w. Fire when the new period begins.
	minOff := offsets[0]
	for _, off := range offsets {
		minOff = min(minOff, off)
	}
	start, _ := w.Add(-time.Duration(minOff) * time.Second).In(loc).ZoneBounds()
	return start.UTC()
}

// first returns the first fire time at or after the start (after the
// cursor, when one is set).
func (c clock) first(cursor time.Time) time.Time {
	if cursor.IsZero() {
		return c.next(c.start.Add(-time.Nanosecond))
	}
	return c.next(cursor)
}
