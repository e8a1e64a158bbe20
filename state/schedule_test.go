package state

import (
	"encoding/json"
	"testing"
	"time"
)

// TestIntervalJSON: an interval is written as a duration string, and read
// from one or from a number of nanoseconds; anything else is refused, naming the field.
func TestIntervalJSON(t *testing.T) {
	b, err := json.Marshal(Schedule{Every: Interval(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["every"] != "1h0m0s" {
		t.Errorf("every marshals as %v (%v), want \"1h0m0s\"", m["every"], err)
	}
	for _, in := range []string{`{"every":"1h0m0s"}`, `{"every":"1h"}`, `{"every":3600000000000}`} {
		var s Schedule
		if err := json.Unmarshal([]byte(in), &s); err != nil || s.Every.Duration() != time.Hour {
			t.Errorf("%s reads as %v (%v), want 1h", in, s.Every, err)
		}
	}
	for _, in := range []string{`{"every":"soon"}`, `{"every":true}`} {
		var s Schedule
		if err := json.Unmarshal([]byte(in), &s); err == nil {
			t.Errorf("%s was read as %v", in, s.Every)
		}
	}
}
