package attr

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// A token item expires by TTL, TokenRetention after it was counted.
func TestTokenExpires(t *testing.T) {
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m := EncodeToken("s", "up::1", at)
	want := N(strconv.FormatInt(at.Add(state.TokenRetention).Unix(), 10))
	if got := m[ExpiresAt]; got != want {
		t.Errorf("expires_at = %v, want %v", got, want)
	}
}

// An after-trigger schedule item without a threshold of at least 1 (one
// written by hand, or by another tool) does not decode: every reader
// divides by the threshold, and would panic on it.
func TestAfterScheduleNeedsAThreshold(t *testing.T) {
	for _, threshold := range []int{0, -2} {
		s := &state.Schedule{Name: "s", WorkflowName: "w", Definition: "{}", After: "up", TimeZone: "UTC", Threshold: threshold}
		m := EncodeSchedule(s)
		if threshold < 0 {
			m["threshold"] = N(strconv.Itoa(threshold))
		}
		got, err := DecodeSchedule("whimbrel_schedules", m)
		var de *state.DecodeError
		if !errors.As(err, &de) || de.Attr != "threshold" {
			t.Errorf("threshold %d: decoded %+v, %v; want a DecodeError on threshold", threshold, got, err)
		}
	}
	s := &state.Schedule{Name: "s", WorkflowName: "w", Definition: "{}", After: "up", TimeZone: "UTC", Threshold: 2}
	if got, err := DecodeSchedule("whimbrel_schedules", EncodeSchedule(s)); err != nil || got.Threshold != 2 {
		t.Errorf("threshold 2: %+v, %v", got, err)
	}
}
