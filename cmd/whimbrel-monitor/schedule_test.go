package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func setEvery(t *testing.T, st schedule.Store, name string, every time.Duration, start time.Time) {
	t.Helper()
	d, err := definition.Parse("w.yaml", []byte("name: scheduled\nactivities:\n  a:\n    command: [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Set(context.Background(), st, schedule.Spec{Name: name, Definition: d, Every: every, Start: start}, time.Now()); err != nil {
		t.Fatal(err)
	}
}

func runs(t *testing.T, st schedule.Store) map[string]bool {
	t.Helper()
	ws, err := st.Workflows(context.Background(), state.WorkflowQuery{Name: "scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, w := range ws {
		out[w.WorkflowRequestID] = true
	}
	return out
}

// TestMonitorFiresSchedules: a monitor is a scheduler, once (--once) and
// at every interval.
func TestMonitorFiresSchedules(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	start := time.Now().Add(-90 * time.Second).Truncate(time.Second)
	setEvery(t, st, "hourly", time.Hour, start)
	if out, code := run(t, env, "--once"); code != 0 {
		t.Fatalf("--once: exit %d\n%s", code, out)
	}
	if got := runs(t, st); !got[schedule.RequestID("hourly", start)] || len(got) != 1 {
		t.Fatalf("after one sweep: runs %v, want hourly@%s", got, start.Format(time.RFC3339))
	}

	setEvery(t, st, "pulse", time.Second, time.Now().Truncate(time.Second))
	m := exec.Command(binary, "--interval", "200ms")
	m.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	// Two more fires of the 1 s schedule, however long the monitor takes
	// to start on a loaded machine (bounded generously).
	for deadline := time.Now().Add(time.Minute); len(runs(t, st)) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	_ = m.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- m.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the monitor exited with %v on SIGTERM", err)
		}
	case <-time.After(20 * time.Second):
		_ = m.Process.Kill()
		t.Fatal("the monitor did not stop on SIGTERM")
	}
	if got := runs(t, st); len(got) < 3 {
		t.Errorf("a running monitor fired %d runs of a 1 s schedule in a minute, want at least 2", len(got)-1)
	}
}

// TestOnceFailsWhenFiringFails: --once sweeps even when firing a schedule
// fails (here one whose stored definition is not a workflow), and then
// exits non-zero, naming the schedule.
func TestOnceFailsWhenFiringFails(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx := context.Background()
	now := state.Truncate(time.Now())
	bad := &state.Schedule{Name: "broken", WorkflowName: "scheduled", Definition: `{"name":`, Every: state.Interval(time.Hour), TimeZone: "UTC",
		Catchup: "all", MaxCatchup: 50, Start: now.Add(-time.Minute), SetTime: now, NextFire: now.Add(-time.Minute)}
	if err := st.PutSchedule(ctx, bad, 0, ""); err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	past := time.Now().Add(-10 * time.Minute)
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued, At: past},
		{From: []state.ActivityState{state.Queued}, To: state.Running, At: past,
			Claim: storetest.Claim("gone")},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	out, code := run(t, dynamotest.Env(t, st.Prefix()), "--once")
	if code == 0 || !strings.Contains(out, "broken") {
		t.Errorf("--once with a schedule that cannot fire: exit %d, want non-zero naming it\n%s", code, out)
	}
	if a, err := st.GetActivity(ctx, k); err != nil || a.State != state.TimedOut {
		t.Errorf("the sweep did not run after the failed tick: activity %+v %v", a, err)
	}
}
