package attr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// --- schedule

// The schedule table holds two kinds of item under one hash key, the
// schedule's name: the schedule itself (entry EntrySchedule) and one item
// per upstream execution a token trigger counted (entry TokenEntry(id)).
const (
	EntrySchedule = "schedule"
	tokenPrefix   = "token/"
)

// TokenEntry is the entry of the item that records a counted upstream
// execution.
func TokenEntry(workflowExecID string) string { return tokenPrefix + workflowExecID }

// ScheduleShard is the due index's hash key of a schedule: the schedules
// are spread over state.ScheduleShards partitions by name.
func ScheduleShard(name string) string {
	var h uint32 = 2166136261 // FNV-1a: stable across processes and versions
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	return fmt.Sprintf("due/%d", h%state.ScheduleShards)
}

// ShardName is the due index's hash key of shard i.
func ShardName(i int) string { return fmt.Sprintf("due/%d", i) }

// EncodeSchedule writes a schedule. Only a schedule with a next fire time
// carries the due index's keys (due_shard, next_fire_epoch), so the index
// holds nothing else.
func EncodeSchedule(s *state.Schedule) Item {
	m := Item{
		"schedule_name": S(s.Name),
		"entry":         S(EntrySchedule),
		"workflow_name": S(s.WorkflowName),
		"definition":    S(s.Definition),
		"version":       Int(s.Version),
		"catchup":       S(s.Catchup),
		"max_catchup":   Int(s.MaxCatchup),
		"timezone":      S(s.TimeZone),
		"paused":        Bool(s.Paused),
		"tokens":        Int(s.Tokens),
		"fired":         Int(s.Fired),
	}
	putStr(m, "cron", s.Cron)
	if s.Every > 0 {
		m["every"] = Seconds(s.Every.Duration())
	}
	putStr(m, "after", s.After)
	putStr(m, "overlap", s.Overlap)
	if s.Threshold > 0 {
		m["threshold"] = Int(s.Threshold)
	}
	putTime(m, "start_time", s.Start, false)
	putTime(m, "end_time", s.End, false)
	putTime(m, "set_time", s.SetTime, false)
	putTime(m, "last_fire", s.LastFire, false)
	putTime(m, "after_since", s.AfterSince, false)
	if !s.NextFire.IsZero() {
		putTime(m, "next_fire", s.NextFire, false)
		m["due_shard"] = S(ScheduleShard(s.Name))
	}
	if len(s.Counted) > 0 {
		b, _ := json.Marshal(s.Counted) // strings always marshal
		m["counted"] = S(b)
	}
	if len(s.Unsettled) > 0 {
		b, _ := json.Marshal(s.Unsettled) // strings always marshal
		m["unsettled"] = S(b)
	}
	if len(s.Params) > 0 {
		b, _ := json.Marshal(s.Params) // a map of strings always marshals
		m["params"] = S(b)
	}
	if len(s.Pending) > 0 {
		var p []string
		for _, t := range s.Pending {
			p = append(p, t.UTC().Format(time.RFC3339Nano))
		}
		m["pending"] = S(strings.Join(p, " "))
	}
	if len(s.Runs) > 0 {
		b, _ := json.Marshal(s.Runs) // plain fields always marshal
		m["run_log"] = S(b)
	}
	return m
}

// DecodeSchedule reads a schedule item.
func DecodeSchedule(table string, m Item) (*state.Schedule, error) {
	d := newDecoder(table, m, "schedule_name")
	s := &state.Schedule{
		Name:         d.str("schedule_name", true),
		WorkflowName: d.str("workflow_name", true),
		Definition:   d.str("definition", true),
		Cron:         d.str("cron", false),
		Every:        state.Interval(d.seconds("every")),
		After:        d.str("after", false),
		TimeZone:     d.str("timezone", false),
		Catchup:      d.str("catchup", false),
		Overlap:      d.str("overlap", false),
		Start:        d.time("start_time"),
		End:          d.time("end_time"),
		SetTime:      d.time("set_time"),
		Paused:       d.boolean("paused"),
		LastFire:     d.time("last_fire"),
		NextFire:     d.time("next_fire"),
		AfterSince:   d.time("after_since"),
	}
	s.Threshold, _ = d.integer("threshold")
	if s.After != "" && s.Threshold < 1 {
		// Every reader divides the tokens by it.
		d.fail("threshold", "an after-trigger schedule needs a threshold of at least 1, not %d: set it again with whimbrel schedule set", s.Threshold)
	}
	s.MaxCatchup, _ = d.integer("max_catchup")
	s.Tokens, _ = d.integer("tokens")
	s.Fired, _ = d.integer("fired")
	s.Version, _ = d.integer("version")
	if p := d.str("params", false); p != "" {
		if err := json.Unmarshal([]byte(p), &s.Params); err != nil {
			d.fail("params", "not a JSON object of strings: %v", err)
		}
	}
	if c := d.str("counted", false); c != "" {
		if err := json.Unmarshal([]byte(c), &s.Counted); err != nil {
			d.fail("counted", "not a JSON list of strings: %v", err)
		}
	}
	if u := d.str("unsettled", false); u != "" {
		if err := json.Unmarshal([]byte(u), &s.Unsettled); err != nil {
			d.fail("unsettled", "not a JSON list of strings: %v", err)
		}
	}
	if p := d.str("pending", false); p != "" {
		for _, f := range strings.Fields(p) {
			t, err := time.Parse(time.RFC3339Nano, f)
			if err != nil {
				d.fail("pending", "%q is not an RFC 3339 time", f)
				break
			}
			s.Pending = append(s.Pending, t.UTC())
		}
	}
	if r := d.str("run_log", false); r != "" {
		if err := json.Unmarshal([]byte(r), &s.Runs); err != nil {
			d.fail("run_log", "not a JSON list of runs: %v", err)
		}
	}
	return s, d.err
}

// TokenPrefix begins the entry of every token item.
const TokenPrefix = tokenPrefix

// EncodeToken writes the item that records a counted upstream execution.
// It expires state.TokenRetention after at.
func EncodeToken(schedule, workflowExecID string, at time.Time) Item {
	m := Item{"schedule_name": S(schedule), "entry": S(TokenEntry(workflowExecID)),
		"workflow_exec_id": S(workflowExecID),
		ExpiresAt:          N(strconv.FormatInt(at.Add(state.TokenRetention).Unix(), 10))}
	putTime(m, "counted_time", at, false)
	return m
}
