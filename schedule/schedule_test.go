package schedule_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// onBoth runs a test on DynamoDB Local and on the embedded store.
func onBoth(t *testing.T, fn func(t *testing.T, st schedule.Store)) {
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		fn(t, dynamotest.NewStore(t, dynamodb.Options{}))
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, newSQLite(t))
	})
}

func newSQLite(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return st
}

func def(t *testing.T, name string) *definition.Workflow {
	t.Helper()
	d, err := definition.Parse(name+".yaml", []byte(fmt.Sprintf(`name: %s
activities:
  a:
    command: ["true"]
  b:
    depends_on: [a]
    command: ["true"]
`, name)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// defParams is def with two declared params, both defaulted.
func defParams(t *testing.T, name string) *definition.Workflow {
	t.Helper()
	d, err := definition.Parse(name+".yaml", []byte(fmt.Sprintf(`name: %s
params:
  region: {default: eu}
  day: {default: mon}
activities:
  a:
    command: ["true"]
  b:
    depends_on: [a]
    command: ["true"]
`, name)))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// runsOf lists the request IDs of the executions of a workflow, sorted,
// and fails on an execution without a scheduled request ID or on two
// executions of one request.
func runsOf(t *testing.T, st schedule.Store, workflowName string) []string {
	t.Helper()
	ws, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: workflowName})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if seen[w.WorkflowRequestID] {
			t.Errorf("request %s started two executions", w.WorkflowRequestID)
		}
		seen[w.WorkflowRequestID] = true
		out = append(out, w.WorkflowRequestID)
	}
	slices.Sort(out)
	return out
}

// expected computes the request IDs of a schedule's runs independently of
// the package: every step from start to end.
func expected(name string, start, end time.Time, step time.Duration) []string {
	var out []string
	for f := start; !f.After(end); f = f.Add(step) {
		out = append(out, name+"@"+f.UTC().Format(time.RFC3339))
	}
	slices.Sort(out)
	return out
}

func same(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %d: %v\nwant %d: %v", what, len(got), got, len(want), want)
	}
}

func get(t *testing.T, st schedule.Store, name string) *state.Schedule {
	t.Helper()
	s, err := st.GetSchedule(testbin.Context(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tick(t *testing.T, st schedule.Store, now time.Time) schedule.Report {
	t.Helper()
	r, err := schedule.Tick(testbin.Context(t), st, now, nil)
	if err != nil {
		t.Fatalf("tick at %s: %v", now.Format(time.RFC3339), err)
	}
	return r
}

// TestConcurrentSchedulersFireEachTimeOnce: a cron schedule over a
// simulated hour, with 4 tickers and 4 monitor-style loops firing at once
// on a shared clock, starts exactly the runs of an independent
// computation, each once; the run log has one line per fire.
func TestConcurrentSchedulersFireEachTimeOnce(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		t0 := ts("2026-11-21T10:00:00Z")
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "five", Definition: def(t, "etl"), Cron: "*/5 * * * *",
			Start: t0, End: t0.Add(time.Hour)}, t0); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		now := t0
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var errs []error
		for i := 0; i < 8; i++ { // 0-3 tickers, 4-7 monitors' loops
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := schedule.Tick(testbin.Context(t), st, clock(), nil); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						return
					}
					if i >= 4 {
						time.Sleep(5 * time.Millisecond) // a monitor sweeps between its ticks
					}
				}
			}()
		}
		for m := 0; m <= 70; m++ {
			time.Sleep(15 * time.Millisecond)
			mu.Lock()
			now = t0.Add(time.Duration(m) * time.Minute)
			mu.Unlock()
		}
		time.Sleep(100 * time.Millisecond)
		close(stop)
		wg.Wait()
		for _, err := range errs {
			t.Errorf("a scheduler failed: %v", err)
		}
		tick(t, st, t0.Add(70*time.Minute))
		want := expected("five", t0, t0.Add(time.Hour), 5*time.Minute)
		same(t, "runs", runsOf(t, st, "etl"), want)
		s := get(t, st, "five")
		var logged []string
		for _, r := range s.Runs {
			logged = append(logged, r.RequestID)
		}
		slices.Sort(logged)
		same(t, "run log", logged, want[len(want)-min(len(want), schedule.RunLogSize):])
		if !s.NextFire.IsZero() || !s.LastFire.Equal(t0.Add(time.Hour)) {
			t.Errorf("after its end: next %v, last %v; want none and the end", s.NextFire, s.LastFire)
		}
		if due, _ := st.DueSchedules(testbin.Context(t), t0.Add(24*time.Hour)); len(due) != 0 {
			t.Errorf("a schedule past its end is still due: %v", due)
		}
	})
}

func TestCatchup(t *testing.T) {
	t0 := ts("2026-11-21T00:00:00Z")
	late := t0.Add(5*time.Hour + 30*time.Minute) // 6 fire times missed: 00:00 … 05:00
	tests := []struct {
		catchup string
		max     int
		want    []string
		skipped int
	}{
		{"all", 0, expected("s", t0, t0.Add(5*time.Hour), time.Hour), 0},
		{"all", 2, expected("s", t0.Add(4*time.Hour), t0.Add(5*time.Hour), time.Hour), 4},
		{"latest", 0, expected("s", t0.Add(5*time.Hour), t0.Add(5*time.Hour), time.Hour), 5},
		{"none", 0, nil, 6},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s-%d", tc.catchup, tc.max), func(t *testing.T) {
			onBoth(t, func(t *testing.T, st schedule.Store) {
				if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Cron: "@hourly",
					Catchup: tc.catchup, MaxCatchup: tc.max, Start: t0}, t0); err != nil {
					t.Fatal(err)
				}
				r := tick(t, st, late)
				same(t, "runs", runsOf(t, st, "etl"), tc.want)
				if r.Skipped != tc.skipped || r.Started != len(tc.want) {
					t.Errorf("report %+v, want %d started and %d skipped", r, len(tc.want), tc.skipped)
				}
				s := get(t, st, "s")
				if tc.skipped > 0 {
					note := s.Runs[len(s.Runs)-1].Note
					if !strings.Contains(note, fmt.Sprintf("skipped %d missed", tc.skipped)) {
						t.Errorf("the run log does not say what was skipped: %+v", s.Runs)
					}
					if grace := "the latest was seen 30m0s late, more than the 2m0s grace"; strings.Contains(note, grace) != (tc.catchup == "none") {
						t.Errorf("the run log says %q; want it to say %q just under catch-up none", note, grace)
					}
				}
				if !s.NextFire.Equal(t0.Add(6 * time.Hour)) {
					t.Errorf("next fire %v, want 06:00", s.NextFire)
				}
				// On time from now on, whatever the rule.
				tick(t, st, t0.Add(6*time.Hour+30*time.Second))
				want := append(slices.Clone(tc.want), "s@"+t0.Add(6*time.Hour).Format(time.RFC3339))
				slices.Sort(want)
				same(t, "runs after an on-time tick", runsOf(t, st, "etl"), want)
				// --now in the past never moves the cursor back.
				tick(t, st, t0)
				if got := get(t, st, "s"); !got.LastFire.Equal(t0.Add(6 * time.Hour)) {
					t.Errorf("a tick in the past moved the cursor to %v", got.LastFire)
				}
			})
		})
	}
}

// TestDaylightSavingThroughTheStore: a daily 02:30 in Europe/Berlin over
// both changes of 2026 fires once a day, at the instants written by hand.
func TestDaylightSavingThroughTheStore(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		for _, p := range []struct{ name, from, to string }{
			{"spring", "2026-03-27T12:00:00Z", "2026-03-30T12:00:00Z"},
			{"autumn", "2026-10-23T12:00:00Z", "2026-10-26T12:00:00Z"},
		} {
			if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: p.name, Definition: def(t, "dst-"+p.name), Cron: "30 2 * * *",
				TimeZone: "Europe/Berlin", Start: ts(p.from), End: ts(p.to)}, ts(p.from)); err != nil {
				t.Fatal(err)
			}
			// Tick every 10 minutes across the change, as a monitor would.
			for now := ts(p.from); !now.After(ts(p.to)); now = now.Add(10 * time.Minute) {
				tick(t, st, now)
			}
		}
		same(t, "spring", runsOf(t, st, "dst-spring"), []string{
			"spring@2026-03-28T01:30:00Z", "spring@2026-03-29T01:00:00Z", "spring@2026-03-30T00:30:00Z"})
		same(t, "autumn", runsOf(t, st, "dst-autumn"), []string{
			"autumn@2026-10-24T00:30:00Z", "autumn@2026-10-25T00:30:00Z", "autumn@2026-10-26T01:30:00Z"})
	})
}

func TestPauseResume(t *testing.T) {
	t0 := ts("2026-11-21T00:00:00Z")
	for _, catchup := range []string{"all", "latest", "none"} {
		t.Run(catchup, func(t *testing.T) {
			onBoth(t, func(t *testing.T, st schedule.Store) {
				if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "m", Definition: def(t, "etl"), Every: time.Minute,
					Catchup: catchup, Start: t0}, t0); err != nil {
					t.Fatal(err)
				}
				for m := 0; m <= 2; m++ {
					tick(t, st, t0.Add(time.Duration(m)*time.Minute))
				}
				if err := schedule.Pause(testbin.Context(t), st, "m"); err != nil {
					t.Fatal(err)
				}
				if r := tick(t, st, t0.Add(10*time.Minute)); r.Started != 0 {
					t.Errorf("a paused schedule fired: %+v", r)
				}
				if due, _ := st.DueSchedules(testbin.Context(t), t0.Add(time.Hour)); len(due) != 0 {
					t.Errorf("a paused schedule is in the due index: %v", due)
				}
				same(t, "runs while paused", runsOf(t, st, "etl"), expected("m", t0, t0.Add(2*time.Minute), time.Minute))
				if err := schedule.Resume(testbin.Context(t), st, "m", t0.Add(10*time.Minute)); err != nil {
					t.Fatal(err)
				}
				tick(t, st, t0.Add(10*time.Minute+10*time.Second))
				want := expected("m", t0, t0.Add(2*time.Minute), time.Minute)
				switch catchup {
				case "all":
					want = expected("m", t0, t0.Add(10*time.Minute), time.Minute)
				case "latest", "none": // 10:00 is 10 s late: within the grace, so on time
					want = append(want, "m@"+t0.Add(10*time.Minute).Format(time.RFC3339))
				}
				slices.Sort(want)
				same(t, "runs after resuming", runsOf(t, st, "etl"), want)
			})
		})
	}
}

// complete starts an execution of the upstream workflow and settles it.
func complete(t *testing.T, st schedule.Store, d *definition.Workflow, to state.WorkflowState) string {
	t.Helper()
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: to}); err != nil {
		t.Fatal(err)
	}
	return id
}

// forgetful is a scheduler that has lost a token trigger's memory: every
// read of a schedule comes without what it counted and its watermark.
type forgetful struct{ schedule.Store }

func (f forgetful) GetSchedule(ctx context.Context, name string) (*state.Schedule, error) {
	s, err := f.Store.GetSchedule(ctx, name)
	if s != nil {
		s.Counted, s.Unsettled, s.AfterSince = nil, nil, time.Time{}
	}
	return s, err
}

// TestAfterThreshold: with threshold 2, five completions of the upstream
// workflow start two runs, whoever observes them and however often: four
// schedulers that forget what was counted tick concurrently, each seeing
// every completion again, the schedule's memory of what it counted is
// lost, and a failed upstream counts nothing.
func TestAfterThreshold(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		up := def(t, "up")
		complete(t, st, up, state.WorkflowCompleted) // before the schedule: not counted
		time.Sleep(5 * time.Millisecond)
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "downstream", Definition: def(t, "down"), After: "up", Threshold: 2},
			time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		for i := 0; i < 5; i++ {
			complete(t, st, up, state.WorkflowCompleted)
			if i == 2 {
				complete(t, st, up, state.WorkflowFailed)
			}
		}
		// Replayed observations: four schedulers tick at once, twice,
		// each reading the schedule without its memory of what was
		// counted, so each sees every completion as new and tries to
		// count it; only the token items can make each count once.
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 2 {
					if _, err := schedule.Tick(testbin.Context(t), forgetful{st}, time.Now(), nil); err != nil {
						t.Errorf("tick: %v", err)
					}
				}
			}()
		}
		wg.Wait()
		tick(t, st, time.Now())
		s := get(t, st, "downstream")
		if s.Tokens != 5 || s.Fired != 2 || len(s.Pending) != 0 {
			t.Errorf("tokens %d, fired %d, pending %v; want 5, 2, none", s.Tokens, s.Fired, s.Pending)
		}
		if got := runsOf(t, st, "down"); len(got) != 2 {
			t.Errorf("downstream runs %v, want 2", got)
		}
		// Forget what was counted: the token items still count each once.
		s.Counted, s.AfterSince = nil, time.Time{}
		if err := st.PutSchedule(testbin.Context(t), s, s.Version, ""); err != nil {
			t.Fatal(err)
		}
		tick(t, st, time.Now())
		if s := get(t, st, "downstream"); s.Tokens != 5 {
			t.Errorf("after forgetting: tokens %d, want still 5", s.Tokens)
		}
		complete(t, st, up, state.WorkflowCompleted) // the sixth: a third run
		tick(t, st, time.Now())
		if got := runsOf(t, st, "down"); len(got) != 3 {
			t.Errorf("downstream runs after a sixth completion %v, want 3", got)
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	st := newSQLite(t)
	now := time.Now()
	d := def(t, "etl")
	tests := []struct {
		spec schedule.Spec
		want string
	}{
		{schedule.Spec{Cron: "61 * * * *"}, `"61 * * * *"`},
		{schedule.Spec{Cron: "@every 5m"}, "--every"},
		{schedule.Spec{Cron: "* * * * *", TimeZone: "Mars/Olympus"}, "Mars/Olympus"},
		{schedule.Spec{Every: time.Hour, Start: now, End: now.Add(-time.Hour)}, "--end"},
		{schedule.Spec{After: "etl", Threshold: -1}, "--threshold -1"},
		{schedule.Spec{After: "never-ran"}, "never-ran"},
		{schedule.Spec{Cron: "* * * * *", Every: time.Minute}, "--cron and --every conflict: give exactly one trigger"},
		{schedule.Spec{Every: time.Minute, After: "etl"}, "--after and --every conflict"},
		{schedule.Spec{}, "no trigger: give one of --cron EXPR, --every DURATION or --after WORKFLOW"},
		{schedule.Spec{Cron: "* * * * *", Catchup: "some"}, `--catchup "some"`},
		{schedule.Spec{Every: 1500 * time.Millisecond}, "whole seconds"},
		{schedule.Spec{Cron: "* * * * *", Threshold: 2}, "--threshold goes with --after"},
	}
	for _, tc := range tests {
		tc.spec.Name, tc.spec.Definition = "bad", d
		_, err := schedule.Set(testbin.Context(t), st, tc.spec, now)
		var se *schedule.SpecError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &se) {
			t.Errorf("Set(%+v) = %v, want a *SpecError naming %s", tc.spec, err, tc.want)
		}
	}
	// Params are checked as whimbrel start checks them.
	required, err := definition.Parse("p.yaml", []byte("name: p\nparams:\n  region: {default: eu}\n  day: {required: true}\nactivities:\n  a: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{"region": "us"}, `param "day" is required`},
		{map[string]string{"regoin": "us", "day": "2024-06-01"}, `param "regoin" is not declared by workflow p (did you mean "region"?)`},
	} {
		_, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "bad", Definition: required, Every: time.Minute, Params: tc.params}, now)
		var pe *definition.ParamsError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &pe) {
			t.Errorf("Set with params %v = %v, want a *definition.ParamsError naming %s", tc.params, err, tc.want)
		}
	}
	if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "a@b", Definition: d, Every: time.Minute}, now); err == nil {
		t.Error("a name with '@' was accepted")
	}
	if all, _ := st.Schedules(testbin.Context(t)); len(all) != 0 {
		t.Errorf("bad input wrote %d schedules", len(all))
	}
}

// TestRunLogShowsStateAndError: the last run's state and stderr tail, as
// the run log reports a run's status and error.
func TestRunLogShowsStateAndError(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		t0 := ts("2026-11-21T00:00:00Z")
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "log", Definition: defParams(t, "etl"), Every: time.Hour, Start: t0,
			Params: map[string]string{"region": "us"}}, t0); err != nil {
			t.Fatal(err)
		}
		tick(t, st, t0)
		s := get(t, st, "log")
		r, ok, err := schedule.LastRun(testbin.Context(t), st, s)
		if err != nil || !ok || r.State != state.WorkflowRunning || r.RequestID != "log@2026-11-21T00:00:00Z" {
			t.Fatalf("LastRun = %+v, %v, %v; want the 00:00 run RUNNING", r, ok, err)
		}
		w, err := st.GetWorkflow(testbin.Context(t), r.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := definition.FromJSON(w.Definition)
		if err != nil {
			t.Fatal(err)
		}
		env := stored.Effective("a").Env
		params, err := definition.StoredParams(w.Params)
		if err != nil {
			t.Fatal(err)
		}
		if env[schedule.EnvSchedule] != "log" || env[schedule.EnvFireTime] != "2026-11-21T00:00:00Z" || params["region"] != "us" || params["day"] != "mon" {
			t.Errorf("the run's environment %v or params %v lack the schedule, fire time or params", env, params)
		}
		if !strings.Contains(w.Source, "schedule log at 2026-11-21T00:00:00Z") {
			t.Errorf("the run's source %q does not name the schedule and fire time", w.Source)
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(w.WorkflowExecID, "a"), WorkflowExecID: w.WorkflowExecID}
		if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
			Claim: &state.Claim{Owner: "o"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed,
			Owner: "o", Exit: &state.Exit{Code: 3}, Error: "starting\nconnecting\nno route to host\n"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.UpdateWorkflow(testbin.Context(t), w.WorkflowExecID, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning},
			To: state.WorkflowFailed, Reason: "a failed"}); err != nil {
			t.Fatal(err)
		}
		r, _, err = schedule.LastRun(testbin.Context(t), st, s)
		if err != nil || r.State != state.WorkflowFailed || r.Error != "a FAILED (exit 3): starting | connecting | no route to host" {
			t.Errorf("LastRun = %+v, %v; want FAILED with the stderr tail", r, err)
		}
	})
}

// TestCatchupFinishesAStartedFire: a scheduler that died after starting
// the first due fire time, before moving the cursor, left a run that
// catch-up latest would skip; the next tick records it as run, not as
// skipped, and skips only the rest.
func TestCatchupFinishesAStartedFire(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		t0 := ts("2026-11-21T00:00:00Z")
		s, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Cron: "@hourly", Catchup: "latest", Start: t0}, t0)
		if err != nil {
			t.Fatal(err)
		}
		d, err := definition.FromJSON(s.Definition)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{RequestID: schedule.RequestID("s", t0)}); err != nil {
			t.Fatal(err)
		}
		r := tick(t, st, t0.Add(5*time.Hour+30*time.Second))
		same(t, "runs", runsOf(t, st, "etl"), []string{"s@2026-11-21T00:00:00Z", "s@2026-11-21T05:00:00Z"})
		if r.Skipped != 4 {
			t.Errorf("skipped %d, want 4 (01:00 … 04:00)", r.Skipped)
		}
		s = get(t, st, "s")
		if len(s.Runs) != 3 || s.Runs[2].RequestID != "s@2026-11-21T00:00:00Z" || !strings.Contains(s.Runs[1].Note, "skipped 4") {
			t.Errorf("run log %+v: want the 00:00 run, the skip of 4, the 05:00 run", s.Runs)
		}
	})
}

// TestLongCatchupInOneTick: a catch-up of more fire times than a tick's
// bound on lost races still finishes in one tick.
func TestLongCatchupInOneTick(t *testing.T) {
	st := newSQLite(t)
	t0 := ts("2026-11-21T00:00:00Z")
	if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Every: time.Second, Start: t0,
		MaxCatchup: 300}, t0); err != nil {
		t.Fatal(err)
	}
	if r := tick(t, st, t0.Add(299*time.Second)); r.Started != 300 {
		t.Errorf("one tick started %d, want 300", r.Started)
	}
	same(t, "runs", runsOf(t, st, "etl"), expected("s", t0, t0.Add(299*time.Second), time.Second))
}

// TestSetAgainKeepsTheCursor: setting an existing schedule again (here to
// change a parameter) without --start loses no fire time and no token:
// the missed fire times are the catch-up rule's, and an upstream
// completion since the last tick still counts. A new trigger says in the
// run log which due fire times of the old one it does not start.
func TestSetAgainKeepsTheCursor(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		t0 := ts("2026-11-21T00:00:00Z")
		spec := schedule.Spec{Name: "hourly", Definition: defParams(t, "etl"), Cron: "@hourly", Start: t0}
		if _, err := schedule.Set(testbin.Context(t), st, spec, t0); err != nil {
			t.Fatal(err)
		}
		tick(t, st, t0.Add(time.Minute)) // 00:00
		spec.Start, spec.Params = time.Time{}, map[string]string{"day": "sat"}
		if _, err := schedule.Set(testbin.Context(t), st, spec, t0.Add(3*time.Hour+30*time.Minute)); err != nil {
			t.Fatal(err)
		}
		tick(t, st, t0.Add(3*time.Hour+30*time.Minute))
		same(t, "runs after setting again", runsOf(t, st, "etl"), expected("hourly", t0, t0.Add(3*time.Hour), time.Hour))

		// A new trigger fires from now; the old one's due fire times are
		// named in the run log.
		spec.Cron = "30 * * * *"
		if _, err := schedule.Set(testbin.Context(t), st, spec, t0.Add(6*time.Hour+15*time.Minute)); err != nil {
			t.Fatal(err)
		}
		s := get(t, st, "hourly")
		if len(s.Runs) == 0 || !strings.Contains(s.Runs[0].Note, "set again: 3 due fire time(s) of the previous trigger from 2026-11-21T04:00:00Z to 2026-11-21T06:00:00Z not started") {
			t.Errorf("the run log does not name the dropped fire times: %+v", s.Runs)
		}
		tick(t, st, t0.Add(6*time.Hour+31*time.Minute))
		want := append(expected("hourly", t0, t0.Add(3*time.Hour), time.Hour), "hourly@2026-11-21T06:30:00Z")
		slices.Sort(want)
		same(t, "runs after a new trigger", runsOf(t, st, "etl"), want)

		// A token trigger: a completion between its last tick and the set
		// still counts.
		up := def(t, "up")
		complete(t, st, up, state.WorkflowCompleted)
		after := schedule.Spec{Name: "tokens", Definition: defParams(t, "down"), After: "up", Threshold: 1}
		if _, err := schedule.Set(testbin.Context(t), st, after, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		tick(t, st, time.Now())
		complete(t, st, up, state.WorkflowCompleted)
		time.Sleep(5 * time.Millisecond)
		after.Params = map[string]string{"day": "sun"}
		if _, err := schedule.Set(testbin.Context(t), st, after, time.Now()); err != nil {
			t.Fatal(err)
		}
		tick(t, st, time.Now())
		tick(t, st, time.Now())
		if s := get(t, st, "tokens"); s.Tokens != 1 || s.Fired != 1 {
			t.Errorf("tokens %d, fired %d; want the completion before the set counted: 1, 1", s.Tokens, s.Fired)
		}
	})
}
