package state_test

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

func TestTimeListRoundTrip(t *testing.T) {
	tests := []struct {
		in   time.Time
		want state.TimeList
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), state.TimeList{2026, 1, 2, 3, 4, 5}},
		{time.Date(2026, 11, 21, 23, 59, 59, 999_000_000, time.UTC), state.TimeList{2026, 11, 21, 23, 59, 59.999}},
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), state.TimeList{1970, 1, 1, 0, 0, 0}},
		// Local times are written in UTC; sub-millisecond parts are dropped.
		{time.Date(2026, 6, 1, 2, 0, 0, 123_456_789, time.FixedZone("CEST", 2*3600)), state.TimeList{2026, 6, 1, 0, 0, 0.123}},
	}
	for _, tc := range tests {
		got := state.NewTimeList(tc.in)
		if got != tc.want {
			t.Errorf("NewTimeList(%v) = %v, want %v", tc.in, got, tc.want)
		}
		back, err := got.Time()
		if err != nil {
			t.Errorf("%v.Time(): %v", got, err)
			continue
		}
		if want := state.Truncate(tc.in); !back.Equal(want) || back.Location() != time.UTC {
			t.Errorf("round trip of %v: got %v, want %v in UTC", tc.in, back, want)
		}
	}
}

func TestTimeListRejects(t *testing.T) {
	tests := []struct {
		in   state.TimeList
		want string
	}{
		{state.TimeList{2026, 13, 1, 0, 0, 0}, "month 13"},
		{state.TimeList{2026, 0, 1, 0, 0, 0}, "month 0"},
		{state.TimeList{2026, 2, 30, 0, 0, 0}, "day 30 does not exist"},
		{state.TimeList{2026, 2, 30, 0, 0, 60.5}, "day 30 does not exist"},
		{state.TimeList{2026, 1, 1, 24, 0, 0}, "hour 24"},
		{state.TimeList{2026, 1, 1.5, 0, 0, 0}, "day 1.5"},
		{state.TimeList{2026, 1, 1, 0, 0, -1}, "second -1"},
	}
	for _, tc := range tests {
		_, err := tc.in.Time()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v.Time(): got %v, want an error about %q", tc.in, err, tc.want)
		}
	}
}

func TestEpochRoundTrip(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Unix(1763752950, 123_000_000), "1763752950.123"},
		{time.Unix(1763752950, 0), "1763752950.000"},
		{time.Unix(0, 5_000_000), "0.005"},
		{time.Unix(-2, -500_000_000), "-2.500"},
	}
	for _, tc := range tests {
		got := state.FormatEpoch(tc.in)
		if got != tc.want {
			t.Errorf("FormatEpoch(%v) = %s, want %s", tc.in, got, tc.want)
		}
		back, err := state.ParseEpoch(got)
		if err != nil || !back.Equal(state.Truncate(tc.in)) {
			t.Errorf("ParseEpoch(%s) = %v, %v; want %v", got, back, err, state.Truncate(tc.in))
		}
	}
	// Whole seconds, as the contract's shell example writes them.
	if got, err := state.ParseEpoch("1763752950"); err != nil || got.Unix() != 1763752950 {
		t.Errorf("ParseEpoch(whole seconds) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "soon", "NaN", "1e300"} {
		if _, err := state.ParseEpoch(bad); err == nil {
			t.Errorf("ParseEpoch(%q) succeeded", bad)
		}
	}
}

func TestListAndEpochAgree(t *testing.T) {
	now := time.Now()
	fromList, err := state.NewTimeList(now).Time()
	if err != nil {
		t.Fatal(err)
	}
	fromEpoch, err := state.ParseEpoch(state.FormatEpoch(now))
	if err != nil {
		t.Fatal(err)
	}
	if !fromList.Equal(fromEpoch) {
		t.Errorf("list gives %v, epoch gives %v", fromList, fromEpoch)
	}
}
