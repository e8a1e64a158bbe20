package state

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Every time is written twice (docs/contract.md#times): as a list
// [year, month, day, hour, minute, second] in UTC, where only the second may
// be fractional, and as Unix epoch seconds. Whimbrel keeps millisecond
// precision in both.

// Precision is the resolution at which times are stored.
const Precision = time.Millisecond

// Truncate rounds t down to the stored precision, in UTC, so that a value
// compares equal to itself after a round trip through a table.
func Truncate(t time.Time) time.Time { return t.UTC().Truncate(Precision) }

// TimeList is the contract's list encoding of a time.
type TimeList [6]float64

// NewTimeList encodes t.
func NewTimeList(t time.Time) TimeList {
	t = Truncate(t)
	sec := float64(t.Second()) + float64(t.Nanosecond()/int(time.Millisecond))/1000
	return TimeList{float64(t.Year()), float64(t.Month()), float64(t.Day()),
		float64(t.Hour()), float64(t.Minute()), sec}
}

// Time decodes the list; every part but the second must be a whole number in
// range.
func (l TimeList) Time() (time.Time, error) {
	names := [5]string{"year", "month", "day", "hour", "minute"}
	limits := [5][2]float64{{1, 9999}, {1, 12}, {1, 31}, {0, 23}, {0, 59}}
	var parts [5]int
	for i := 0; i < 5; i++ {
		v := l[i]
		if v != math.Trunc(v) || v < limits[i][0] || v > limits[i][1] {
			return time.Time{}, fmt.Errorf("%s %v is not a whole number from %v to %v", names[i], v, limits[i][0], limits[i][1])
		}
		parts[i] = int(v)
	}
	s := l[5]
	if math.IsNaN(s) || s < 0 || s >= 61 {
		return time.Time{}, fmt.Errorf("second %v is not from 0 to 60.999", s)
	}
	if d := time.Date(parts[0], time.Month(parts[1]), parts[2], 0, 0, 0, 0, time.UTC); d.Day() != parts[2] {
		return time.Time{}, fmt.Errorf("day %d does not exist in %04d-%02d", parts[2], parts[0], parts[1])
	}
	ms := int64(math.Round(s * 1000))
	return time.Date(parts[0], time.Month(parts[1]), parts[2], parts[3], parts[4], 0, 0, time.UTC).
		Add(time.Duration(ms) * time.Millisecond), nil
}

// FormatEpoch writes t as epoch seconds with millisecond precision, the way
// it is stored in a DynamoDB Number ("1763752950.123").
func FormatEpoch(t time.Time) string {
	ms := Truncate(t).UnixMilli()
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	return fmt.Sprintf("%s%d.%03d", sign, ms/1000, ms%1000)
}

// ParseEpoch reads epoch seconds, whole or fractional.
func ParseEpoch(s string) (time.Time, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return time.Time{}, fmt.Errorf("%q is not a number of seconds", s)
	}
	if math.Abs(f) > 1e11 { // beyond the year 5000: a unit mistake, not a time
		if math.Abs(f) > 1e11 && math.Abs(f) < 1e14 {
			return time.Time{}, fmt.Errorf("%s seconds is out of range: milliseconds, not seconds?", s)
		}
		return time.Time{}, fmt.Errorf("%s seconds is out of range", s)
	}
	return time.UnixMilli(int64(math.Round(f * 1000))).UTC(), nil
}

// NotSet is the epoch the contract uses for "not started" and "heartbeats
// off": a negative number.
const NotSet = -1
