package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// regional declares two params; its one activity writes what it saw of
// region through the template and the environment, and of day.
const regional = `name: regional
params:
  region: {default: eu}
  day: {required: true}
activities:
  report:
    command:
      - sh
      - -c
      - 'printf "{\"template\": \"%s\", \"env\": \"%s\", \"day\": \"%s\"}" "$1" "$WHIMBREL_PARAM_REGION" "$WHIMBREL_PARAM_DAY" > "$WHIMBREL_OUTPUT"'
      - sh
      - '{{ params.region }}'
`

// rawOf writes raw items to the store env names.
func rawOf(env []string) rawStore {
	var store, prefix string
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "WHIMBREL_STORE="); ok {
			store = v
		}
		if v, ok := strings.CutPrefix(e, "WHIMBREL_TABLE_PREFIX="); ok {
			prefix = v
		}
	}
	if path, ok := strings.CutPrefix(store, "sqlite:"); ok {
		return rawSQLite{path: path, prefix: state.DefaultTablePrefix}
	}
	return rawDynamo{prefix: prefix}
}

func timeList(t time.Time) []any {
	return []any{t.Year(), int(t.Month()), t.Day(), t.Hour(), t.Minute(), t.Second()}
}

// putEnvSchedule writes, raw, a schedule every minute that fires once at
// at, with its params' values both in params and in the definition's
// defaults.env as WHIMBREL_PARAM_<NAME>, where the declared params'
// defaults would hide them.
func putEnvSchedule(t *testing.T, env []string, name string, at time.Time, params map[string]string) {
	t.Helper()
	d, err := definition.Parse("p.yaml", []byte(regional))
	if err != nil {
		t.Fatal(err)
	}
	d.Defaults.Env = map[string]string{}
	for k, v := range params {
		d.Defaults.Env["WHIMBREL_PARAM_"+strings.ToUpper(k)] = v
	}
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	epoch := int(at.Unix())
	rawOf(env).put(t, "schedule", rawItem{
		"schedule_name": name, "entry": "schedule", "workflow_name": "regional", "definition": d.JSON(),
		"version": 1, "catchup": "all", "max_catchup": 50, "timezone": "UTC", "paused": false, "tokens": 0, "fired": 0,
		"every": 60, "params": string(b),
		"start_time": timeList(at), "start_time_epoch": epoch, "end_time": timeList(at), "end_time_epoch": epoch,
		"set_time": timeList(at), "set_time_epoch": epoch,
		"next_fire": timeList(at), "next_fire_epoch": epoch, "due_shard": fmt.Sprintf("due/%d", h.Sum32()%4),
	})
}

// TestScheduleParamsReachTheRun: a schedule's --param sets the run's
// declared params, checked when it is set (a missing required param or
// an undeclared one exits 2 and writes nothing); the fired run's template
// and WHIMBREL_PARAM_* see the scheduled values, and status and schedule
// show say so. A schedule item written raw with its values in the
// definition's defaults.env as well fires with its values too.
func TestScheduleParamsReachTheRun(t *testing.T) {
	t.Parallel()
	scheduleStores(t, func(t *testing.T, env []string, st schedule.Store) {
		file := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(file, []byte(regional), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--param", "region=us"}, `param "day" is required (give it with --param day=VALUE)`},
			{[]string{"--param", "regoin=us", "--param", "day=2024-06-01"}, `param "regoin" is not declared by workflow regional (did you mean "region"?)`},
		} {
			args := append([]string{"schedule", "set", "sp", file, "--every", "1m"}, tc.args...)
			if _, errOut, code := whimbrel(t, env, args...); code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("%v: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, errOut)
			}
		}
		if out, _, _ := whimbrel(t, env, "schedule", "list", "--json"); strings.TrimSpace(out) != "[]" {
			t.Fatalf("a refused set wrote a schedule: %s", out)
		}

		at := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "sp", file, "--every", "1m", "--overlap", "allow", "--start", at.Format(time.RFC3339),
			"--end", at.Format(time.RFC3339), "--param", "region=us", "--param", "day=2024-06-01"); code != 0 {
			t.Fatalf("schedule set: exit %d\n%s%s", code, out, errOut)
		}
		putEnvSchedule(t, env, "old", at, map[string]string{"region": "us", "day": "2024-06-02"})
		before := time.Now().Truncate(time.Second)
		if out, errOut, code := whimbrel(t, env, "schedule", "tick", "--now", at.Format(time.RFC3339)); code != 0 || !strings.Contains(out, "started 2") {
			t.Fatalf("schedule tick: exit %d\n%s%s", code, out, errOut)
		}
		after := time.Now()
		daemon(t, env, "whimbrel-launcher", "--interval", "200ms", "--log-dir", t.TempDir())
		var ws []*state.WorkflowExec
		waitUntil(t, "both runs complete", func() bool {
			var err error
			ws, err = st.Workflows(context.Background(), state.WorkflowQuery{Name: "regional"})
			done := 0
			for _, w := range ws {
				if w.State.Terminal() {
					done++
				}
			}
			return err == nil && done == 2
		})
		want := map[string]string{schedule.RequestID("sp", at): "2024-06-01", schedule.RequestID("old", at): "2024-06-02"}
		for _, w := range ws {
			day, ok := want[w.WorkflowRequestID]
			if !ok || w.State != state.WorkflowCompleted {
				t.Errorf("run %s: %s, want one of %v COMPLETED", w.WorkflowRequestID, w.State, want)
				continue
			}
			acts, err := st.Activities(context.Background(), w.WorkflowExecID)
			if err != nil || len(acts) != 1 {
				t.Fatalf("activities of %s: %v %v", w.WorkflowExecID, acts, err)
			}
			var saw map[string]string
			if err := json.Unmarshal([]byte(acts[0].Output), &saw); err != nil || saw["template"] != "us" || saw["env"] != "us" || saw["day"] != day {
				t.Errorf("run %s saw %s (%v), want region us through the template and the environment, day %s", w.WorkflowRequestID, acts[0].Output, err, day)
			}
			out, _, _ := whimbrel(t, env, "status", w.WorkflowExecID)
			if !strings.Contains(out, "params: day="+day+", region=us") {
				t.Errorf("status of %s does not show the params it ran with:\n%s", w.WorkflowRequestID, out)
			}
		}
		out, _, _ := whimbrel(t, env, "schedule", "show", "sp")
		if !strings.Contains(out, "params: day=2024-06-01, region=us") {
			t.Errorf("schedule show lacks the params:\n%s", out)
		}
		// "fired at" is when the tick fired, not the --now it was given.
		s, err := st.GetSchedule(context.Background(), "sp")
		if err != nil || len(s.Runs) != 1 {
			t.Fatalf("schedule sp: %+v %v", s, err)
		}
		if r := s.Runs[0]; !r.Fire.Equal(at) || r.At.Before(before) || r.At.After(after) {
			t.Errorf("run log line %+v: want fire %s and fired at between %s and %s", r, at, before, after)
		}
	})
}

// TestScheduleFireThatFailsToStart: a schedule item written raw without
// the required param fails to start at each fire. The failure is in
// schedule list (last error), list --json, schedule show and show --json,
// with the error and the tries; a tick within the backoff does not try
// again, a later one does (the same line updated); setting the schedule
// again with the param fixes it, and the next tick starts the run.
func TestScheduleFireThatFailsToStart(t *testing.T) {
	t.Parallel()
	scheduleStores(t, func(t *testing.T, env []string, st schedule.Store) {
		at := time.Now().UTC().Truncate(time.Minute).Add(-5 * time.Minute)
		putEnvSchedule(t, env, "old", at, map[string]string{"region": "us"})
		tick := func(d time.Duration) (string, int) {
			t.Helper()
			out, errOut, code := whimbrel(t, env, "schedule", "tick", "--now", at.Add(d).Format(time.RFC3339))
			return out + errOut, code
		}
		if out, code := tick(0); code != 1 || !strings.Contains(out, "failed to start 1") || !strings.Contains(out, `param \"day\" is required`) && !strings.Contains(out, `param "day" is required`) {
			t.Fatalf("tick: exit %d, want 1 and the failed start:\n%s", code, out)
		}
		wantErr := `failed to start (1 try; next try at ` + at.Add(schedule.RetryFirst).Format(time.RFC3339) + `): start regional: parameters: param "day" is required`
		if out, _, _ := whimbrel(t, env, "schedule", "list"); !strings.Contains(out, "LAST ERROR") || !strings.Contains(out, wantErr) {
			t.Errorf("schedule list lacks the failed start %q:\n%s", wantErr, out)
		}
		var list []struct {
			Name      string `json:"name"`
			Every     string `json:"every"`
			LastError string `json:"last_error"`
		}
		if out, _, _ := whimbrel(t, env, "schedule", "list", "--json"); json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 ||
			!strings.HasPrefix(list[0].LastError, wantErr) || list[0].Every != "1m0s" {
			t.Errorf("schedule list --json: %s", out)
		}
		if out, _, _ := whimbrel(t, env, "schedule", "show", "old"); !strings.Contains(out, "NOT STARTED") || !strings.Contains(out, "last error: "+wantErr) ||
			!strings.Contains(out, "retrying fire "+at.Format(time.RFC3339)) {
			t.Errorf("schedule show lacks the failed start:\n%s", out)
		}
		show := func() (lines []state.ScheduleRun) {
			t.Helper()
			var v struct {
				Log []state.ScheduleRun `json:"run_log"`
			}
			out, errOut, _ := whimbrel(t, env, "schedule", "show", "old", "--json")
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("schedule show --json: %v\n%s%s", err, out, errOut)
			}
			return v.Log
		}
		if l := show(); len(l) != 1 || !l[0].Failed() || l[0].Tries != 1 || !l[0].Fire.Equal(at) || !l[0].RetryAt.Equal(at.Add(schedule.RetryFirst)) {
			t.Errorf("schedule show --json: %+v", l)
		}
		if out, code := tick(10 * time.Second); code != 0 || !strings.Contains(out, "failed to start 0") {
			t.Errorf("a tick within the backoff: exit %d\n%s", code, out)
		}
		if out, code := tick(31 * time.Second); code != 1 {
			t.Errorf("a tick after the backoff: exit %d, want 1\n%s", code, out)
		}
		if l := show(); len(l) != 1 || l[0].Tries != 2 {
			t.Errorf("after the second try, the run log: %+v; want its one line with 2 tries", l)
		}
		// The fix: set it again with the param; the next tick starts it.
		file := filepath.Join(t.TempDir(), "p.yaml")
		if err := os.WriteFile(file, []byte(regional), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "old", file, "--every", "1m", "--overlap", "allow", "--start", at.Format(time.RFC3339),
			"--end", at.Format(time.RFC3339), "--param", "region=us", "--param", "day=2024-06-03"); code != 0 {
			t.Fatalf("schedule set: exit %d\n%s%s", code, out, errOut)
		}
		if out, code := tick(40 * time.Second); code != 0 || !strings.Contains(out, "started 1") {
			t.Errorf("the tick after the fix: exit %d\n%s", code, out)
		}
		if l := show(); len(l) != 1 || l[0].Failed() || l[0].WorkflowExecID == "" || l[0].Tries != 3 {
			t.Errorf("once started, the run log: %+v; want its one line with the run and 3 tries", l)
		}
		if out, _, _ := whimbrel(t, env, "schedule", "list", "--json"); strings.Contains(out, "last_error") {
			t.Errorf("a started run still shows the failure: %s", out)
		}
		if out, errOut, code := whimbrel(t, env, "schedule", "delete", "old"); code != 0 ||
			strings.TrimSpace(out) != "deleted schedule old (every 1m0s, starts regional); the runs it started stay" {
			t.Errorf("schedule delete: exit %d\n%s%s", code, out, errOut)
		}
	})
}

// TestScheduleUsageErrorsExit2: each mistake on the command line exits 2
// with a message naming the flag and what it wants, and writes nothing.
func TestScheduleUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	env := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(t.TempDir(), "state.db")}
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	file := example(t, "etl.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "set", "s", file, "--cron", "0 25 * * *"}, `--cron "0 25 * * *" is not a cron expression`},
		{[]string{"schedule", "set", "s", file, "--cron", "@daily", "--timezone", "Europe/Atlantis"}, `--timezone "Europe/Atlantis" is not an IANA time zone: give one such as Europe/Berlin`},
		{[]string{"schedule", "set", "s", file}, "no trigger: give one of --cron EXPR, --every DURATION or --after WORKFLOW"},
		{[]string{"schedule", "set", "s", file, "--cron", "@daily", "--every", "1h"}, "--cron and --every conflict: give exactly one trigger"},
		{[]string{"schedule", "set", "s", file, "--after", "ghost"}, "--after ghost: no workflow of that name"},
		{[]string{"schedule", "set", "s", file, "--every", "1h", "--start", "2026-11-21T00:00:00Z", "--end", "2026-11-20T00:00:00Z"}, "--end 2026-11-20T00:00:00Z is before the start"},
		{[]string{"schedule", "set", "s", file, "--every", "1h", "--start", "tomorrow"}, `--start: "tomorrow" is not a time in RFC 3339`},
		{[]string{"schedule", "set", "s", file, "--every", "1h", "--param", "x=1"}, `param "x" is not declared by workflow nightly-etl`},
		{[]string{"schedule", "tick", "--now"}, "--now needs a value: a time, RFC 3339, such as 2026-11-21T02:00:00Z"},
		{[]string{"schedule", "tick", "--now", "noon"}, `--now: "noon" is not a time in RFC 3339`},
	} {
		_, errOut, code := whimbrel(t, env, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, "EOL") {
			t.Errorf("%v: exit %d, want 2 and %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	if out, _, _ := whimbrel(t, env, "schedule", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("bad input wrote a schedule: %s", out)
	}
}
