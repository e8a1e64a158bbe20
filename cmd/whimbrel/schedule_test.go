package main

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// scheduleStores gives a test the environment of real processes on each
// store, and the store itself for checking.
func scheduleStores(t *testing.T, fn func(t *testing.T, env []string, st schedule.Store)) {
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		prefix := dynamotest.Prefix(t)
		env := dynamotest.Env(t, prefix)
		if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
			t.Fatalf("install: %s", errOut)
		}
		fn(t, env, dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: prefix}))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "state.db")
		env := []string{"WHIMBREL_STORE=sqlite:" + path}
		if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
			t.Fatalf("install: %s", errOut)
		}
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, env, st)
	})
}

// scheduledRuns lists the request IDs of a workflow's executions, and
// fails unless each is RUNNING with its first activity READY: a start
// that died half-way was finished.
func scheduledRuns(t *testing.T, st schedule.Store, workflowName string) []string {
	t.Helper()
	ctx := context.Background()
	ws, err := st.Workflows(ctx, state.WorkflowQuery{Name: workflowName})
	if err != nil {
		t.Fatal(err)
	}
	d, err := definition.Load(example(t, "etl.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range ws {
		out = append(out, w.WorkflowRequestID)
		if w.State != state.WorkflowRunning {
			t.Errorf("run %s is %s, want RUNNING", w.WorkflowRequestID, w.State)
			continue
		}
		acts, err := st.Activities(ctx, w.WorkflowExecID)
		if err != nil || len(acts) != len(d.Activities) {
			t.Errorf("run %s has %d activities (%v), want %d", w.WorkflowRequestID, len(acts), err, len(d.Activities))
		}
	}
	slices.Sort(out)
	return out
}

func everySecond(name string, from time.Time, n int, step time.Duration) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, name+"@"+from.Add(time.Duration(i)*step).UTC().Format(time.RFC3339))
	}
	slices.Sort(out)
	return out
}

func checkRuns(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("runs:\n got %d: %v\nwant %d: %v", len(got), got, len(want), want)
	}
}

// TestSchedulersAsProcesses: 4 whimbrel-monitor processes and 4 loops of
// `whimbrel schedule tick` processes fire one schedule at once; each fire
// time starts exactly one run.
func TestSchedulersAsProcesses(t *testing.T) {
	t.Parallel()
	scheduleStores(t, func(t *testing.T, env []string, st schedule.Store) {
		start := time.Now().Add(3 * time.Second).Truncate(time.Second)
		const n = 5
		end := start.Add((n - 1) * 2 * time.Second)
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "pulse", example(t, "etl.yaml"), "--every", "2s", "--overlap", "allow",
			"--start", start.Format(time.RFC3339), "--end", end.Format(time.RFC3339)); code != 0 {
			t.Fatalf("schedule set: %s%s", out, errOut)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var monitors []*exec.Cmd
		for i := 0; i < 4; i++ {
			m := exec.CommandContext(ctx, filepath.Join(filepath.Dir(binary), "whimbrel-monitor"), "--interval", "300ms")
			m.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
			monitors = append(monitors, m)
		}
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end.Add(2 * time.Second)) {
					if out, errOut, code := whimbrel(t, env, "schedule", "tick"); code != 0 {
						t.Errorf("schedule tick: exit %d\n%s%s", code, out, errOut)
						return
					}
				}
			}()
		}
		wg.Wait()
		for _, m := range monitors {
			_ = m.Process.Signal(syscall.SIGTERM)
			_ = m.Wait()
		}
		// On a loaded machine the last fire time may still be in a monitor's
		// hands when it is stopped; one more tick finishes whatever start it
		// left half-done, as the next scheduler would.
		if out, errOut, code := whimbrel(t, env, "schedule", "tick"); code != 0 {
			t.Errorf("last schedule tick: exit %d\n%s%s", code, out, errOut)
		}
		checkRuns(t, scheduledRuns(t, st, "nightly-etl"), everySecond("pulse", start, n, 2*time.Second))
		out, _, code := whimbrel(t, env, "schedule", "list")
		if code != 0 || !strings.Contains(out, "pulse") || !strings.Contains(out, "RUNNING") || !strings.Contains(out, "no more fire times") {
			t.Errorf("schedule list: exit %d\n%s", code, out)
		}
		out, _, code = whimbrel(t, env, "schedule", "show", "pulse")
		if code != 0 || strings.Count(out, "RUNNING") != n {
			t.Errorf("schedule show: exit %d, want %d runs RUNNING\n%s", code, n, out)
		}
	})
}

// TestTickKilledAtRandomPoints: `whimbrel schedule tick` processes, each
// killed with SIGKILL at a random moment while catching up 120 fire times,
// lose none and double none: the next tick finishes what a killed one
// started.
func TestTickKilledAtRandomPoints(t *testing.T) {
	t.Parallel()
	scheduleStores(t, func(t *testing.T, env []string, st schedule.Store) {
		const n = 120
		start := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
		end := start.Add((n - 1) * time.Second)
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "burst", example(t, "etl.yaml"), "--every", "1s", "--overlap", "allow",
			"--start", start.Format(time.RFC3339), "--end", end.Format(time.RFC3339), "--max-catchup", "1000"); code != 0 {
			t.Fatalf("schedule set: %s%s", out, errOut)
		}
		kills := killTicks(t, env, func() bool {
			s, err := st.GetSchedule(context.Background(), "burst")
			if err != nil {
				t.Fatal(err)
			}
			return !s.LastFire.Before(end)
		})
		if _, errOut, code := whimbrel(t, env, "schedule", "tick"); code != 0 {
			t.Fatalf("the last tick: %s", errOut)
		}
		t.Logf("%d ticks killed", kills)
		if kills < 3 {
			t.Errorf("only %d ticks were killed mid-way: the test proved little", kills)
		}
		checkRuns(t, scheduledRuns(t, st, "nightly-etl"), everySecond("burst", start, n, time.Second))
		s, err := st.GetSchedule(context.Background(), "burst")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range s.Runs {
			if r.RequestID != "" && seen[r.RequestID] {
				t.Errorf("the run log has %s twice", r.RequestID)
			}
			seen[r.RequestID] = true
		}
		if !s.LastFire.Equal(end) {
			t.Errorf("cursor %v, want the last fire time %v", s.LastFire, end)
		}
	})
}

// killTicks runs `whimbrel schedule tick` processes and kills each with
// SIGKILL after a random 10-120 ms, until done says so or 40 were killed;
// it returns how many were killed mid-way.
func killTicks(t *testing.T, env []string, done func() bool) int {
	t.Helper()
	kills := 0
	for i := 0; i < 300 && kills < 40 && !done(); i++ {
		cmd := exec.Command(binary, "schedule", "tick")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case <-exited:
			continue // it finished before the kill: the next one has less to do
		case <-time.After(time.Duration(10+rand.IntN(110)) * time.Millisecond):
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		if err := <-exited; err != nil && strings.Contains(err.Error(), "killed") {
			kills++
		}
	}
	return kills
}

// TestTokenTicksKilledAtRandomPoints: 60 completions of the upstream
// workflow, counted by ticks killed at random moments, start exactly 20
// runs of a threshold-3 token trigger: no completion lost or counted
// twice, no run lost or doubled.
func TestTokenTicksKilledAtRandomPoints(t *testing.T) {
	t.Parallel()
	scheduleStores(t, func(t *testing.T, env []string, st schedule.Store) {
		if out, errOut, code := whimbrel(t, env, "register", example(t, "etl.yaml")); code != 0 {
			t.Fatalf("register: %s%s", out, errOut)
		}
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "chain", example(t, "nightly-report.yaml"), "--overlap", "allow",
			"--after", "nightly-etl", "--threshold", "3"); code != 0 {
			t.Fatalf("schedule set: %s%s", out, errOut)
		}
		time.Sleep(10 * time.Millisecond)
		const n = 60
		start := time.Now().Add(-time.Hour).Truncate(time.Second)
		if out, errOut, code := whimbrel(t, env, "schedule", "set", "burst", example(t, "etl.yaml"), "--every", "1s", "--overlap", "allow",
			"--start", start.Format(time.RFC3339), "--end", start.Add((n-1)*time.Second).Format(time.RFC3339), "--max-catchup", "1000"); code != 0 {
			t.Fatalf("schedule set: %s%s", out, errOut)
		}
		if _, errOut, code := whimbrel(t, env, "schedule", "tick"); code != 0 {
			t.Fatalf("tick: %s", errOut)
		}
		ctx := context.Background()
		ws, err := st.Workflows(ctx, state.WorkflowQuery{Name: "nightly-etl"})
		if err != nil || len(ws) != n {
			t.Fatalf("%d upstream runs (%v), want %d", len(ws), err, n)
		}
		for _, w := range ws {
			if _, err := st.UpdateWorkflow(ctx, w.WorkflowExecID, state.WorkflowChange{
				From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted}); err != nil {
				t.Fatal(err)
			}
		}
		kills := killTicks(t, env, func() bool {
			s, err := st.GetSchedule(ctx, "chain")
			if err != nil {
				t.Fatal(err)
			}
			return s.Fired == n/3
		})
		if _, errOut, code := whimbrel(t, env, "schedule", "tick"); code != 0 {
			t.Fatalf("the last tick: %s", errOut)
		}
		t.Logf("%d ticks killed", kills)
		s, err := st.GetSchedule(ctx, "chain")
		if err != nil {
			t.Fatal(err)
		}
		if s.Tokens != n || s.Fired != n/3 || len(s.Pending) != 0 {
			t.Errorf("tokens %d, fired %d, pending %v; want %d, %d, none", s.Tokens, s.Fired, s.Pending, n, n/3)
		}
		down, err := st.Workflows(ctx, state.WorkflowQuery{Name: "nightly-report"})
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, w := range down {
			if ids[w.WorkflowRequestID] || !strings.HasPrefix(w.WorkflowRequestID, "chain@") || w.State != state.WorkflowRunning {
				t.Errorf("downstream run %s (%s): doubled, misnamed or half-started", w.WorkflowRequestID, w.State)
			}
			ids[w.WorkflowRequestID] = true
		}
		if len(down) != n/3 {
			t.Errorf("%d downstream runs, want %d", len(down), n/3)
		}
	})
}

// TestScheduleCommandsRefuseBadInput: each names what is wrong, exits 2
// (usage), and writes nothing.
func TestScheduleCommandsRefuseBadInput(t *testing.T) {
	t.Parallel()
	env := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(t.TempDir(), "state.db")}
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cron", "0 25 * * *"}, "0 25 * * *"},
		{[]string{"--cron", "@daily", "--timezone", "Europe/Atlantis"}, "Europe/Atlantis"},
		{[]string{"--every", "1h", "--start", "2026-11-21T00:00:00Z", "--end", "2026-11-20T00:00:00Z"}, "--end"},
		{[]string{"--after", "nightly-etl", "--threshold", "0"}, "--threshold 0"},
		{[]string{"--after", "ghost", "--threshold", "2"}, "ghost"},
		{[]string{"--every", "soon"}, "--every"},
		{[]string{"--cron", "@daily", "--catchup", "some"}, "--catchup"},
		{[]string{"--cron", "@daily", "--max-catchup", "0"}, "--max-catchup 0"},
	} {
		args := append([]string{"schedule", "set", "bad", example(t, "etl.yaml")}, tc.args...)
		_, errOut, code := whimbrel(t, env, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, want 2 (usage) and an error naming %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	if out, _, _ := whimbrel(t, env, "schedule", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("bad input wrote a schedule: %s", out)
	}
	if _, errOut, code := whimbrel(t, env, "schedule", "pause", "ghost"); code == 0 || !strings.Contains(errOut, "ghost") {
		t.Errorf("pause of a missing schedule: exit %d\n%s", code, errOut)
	}
}

// TestScheduleSetWarnsOfCatchupNone: --catchup none skips every fire a
// scheduler does not see within the grace; `schedule set` says so.
func TestScheduleSetWarnsOfCatchupNone(t *testing.T) {
	t.Parallel()
	env := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(t.TempDir(), "state.db")}
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	file := example(t, "etl.yaml")
	for _, catchup := range []string{"none", "latest"} {
		_, errOut, code := whimbrel(t, env, "schedule", "set", "s-"+catchup, file, "--cron", "@hourly", "--catchup", catchup)
		if code != 0 {
			t.Fatalf("set --catchup %s: exit %d\n%s", catchup, code, errOut)
		}
		if warned := strings.Contains(errOut, "warning: schedule s-"+catchup+": --catchup none starts a fire time only if a scheduler ticks within 2m0s"); warned != (catchup == "none") {
			t.Errorf("set --catchup %s: warned %v, want %v:\n%s", catchup, warned, catchup == "none", errOut)
		}
	}
}
