package schedule

import (
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// fires lists the fire times of a clock from start (inclusive) to end.
func fires(t *testing.T, c clock, from, to time.Time) []string {
	t.Helper()
	var out []string
	for f := c.next(from.Add(-time.Nanosecond)); !f.IsZero() && !f.After(to); f = c.next(f) {
		out = append(out, f.Format(time.RFC3339))
		if len(out) > 10000 {
			t.Fatal("runaway")
		}
	}
	return out
}

// TestClockAcrossDaylightSaving compares the fire times with lists written
// by hand from the time zone rules: in Europe/Berlin the clocks go from
// 02:00 CET to 03:00 CEST on 2026-03-29 (01:00Z) and from 03:00 CEST back
// to 02:00 CET on 2026-10-25 (01:00Z); in America/New_York from 02:00 EST
// to 03:00 EDT on 2026-03-08 (07:00Z).
func TestClockAcrossDaylightSaving(t *testing.T) {
	tests := []struct {
		name, expr, tz string
		from, to       string
		want           []string
	}{
		{"daily 02:30, spring: the missing 02:30 fires when the gap ends", "30 2 * * *", "Europe/Berlin",
			"2026-03-27T00:00:00Z", "2026-03-31T00:00:00Z",
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"daily 02:30, autumn: the repeated 02:30 fires once, the first time", "30 2 * * *", "Europe/Berlin",
			"2026-10-23T00:00:00Z", "2026-10-27T00:00:00Z",
			[]string{"2026-10-23T00:30:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"hourly, spring: 02:00 does not happen; it and 03:00 are the same instant, one fire", "0 * * * *", "Europe/Berlin",
			"2026-03-28T22:30:00Z", "2026-03-29T03:30:00Z",
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"}},
		{"hourly, autumn: 02:00 happens twice and fires once", "0 * * * *", "Europe/Berlin",
			"2026-10-24T22:30:00Z", "2026-10-25T03:30:00Z",
			[]string{"2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}},
		{"@daily in New York across the spring change", "@daily", "America/New_York",
			"2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z",
			[]string{"2026-03-07T05:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"}},
		{"every 15 minutes past 2 in New York on the spring day", "*/15 2 * * *", "America/New_York",
			"2026-03-08T06:00:00Z", "2026-03-08T09:00:00Z",
			[]string{"2026-03-08T07:00:00Z"}},
		{"UTC weekdays at 09:00", "0 9 * * 1-5", "UTC",
			"2026-11-20T00:00:00Z", "2026-11-24T00:00:00Z",
			[]string{"2026-11-20T09:00:00Z", "2026-11-23T09:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := parseCron(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			loc, err := time.LoadLocation(tc.tz)
			if err != nil {
				t.Fatal(err)
			}
			c := clock{cron: sched, loc: loc, start: utc(tc.from)}
			got := fires(t, c, utc(tc.from), utc(tc.to))
			if len(got) != len(tc.want) {
				t.Fatalf("fires = %v\nwant    %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("fires = %v\nwant    %v", got, tc.want)
				}
			}
		})
	}
}

func TestClockEveryFromStart(t *testing.T) {
	start := utc("2026-11-21T10:00:07Z")
	c := clock{every: 90 * time.Second, start: start, end: utc("2026-11-21T10:05:00Z")}
	got := fires(t, c, start, utc("2026-11-21T11:00:00Z"))
	want := []string{"2026-11-21T10:00:07Z", "2026-11-21T10:01:37Z", "2026-11-21T10:03:07Z", "2026-11-21T10:04:37Z"}
	if len(got) != len(want) {
		t.Fatalf("fires = %v, want %v (start inclusive, end inclusive)", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("fires = %v, want %v", got, want)
		}
	}
	if f := c.first(utc("2026-11-21T10:01:37Z")); f.Format(time.RFC3339) != "2026-11-21T10:03:07Z" {
		t.Errorf("first after a cursor = %s", f)
	}
}
