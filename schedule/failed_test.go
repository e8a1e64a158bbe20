package schedule_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// failingStarts is a store whose CreateWorkflow fails while broken is set,
// as a store that refuses writes (throttled, unavailable) does.
type failingStarts struct {
	schedule.Store
	broken atomic.Bool
	tries  atomic.Int32
	// flaky fails every third call while set, after the write when
	// the call count is odd (an answer lost on the way back).
	flaky atomic.Bool
}

var errStoreDown = errors.New("the store refused the write (test)")

func (f *failingStarts) CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error {
	n := f.tries.Add(1)
	if f.broken.Load() {
		return errStoreDown
	}
	if f.flaky.Load() && n%3 == 0 {
		if n%2 == 1 {
			if err := f.Store.CreateWorkflow(ctx, w); err != nil {
				return err
			}
		}
		return errStoreDown
	}
	return f.Store.CreateWorkflow(ctx, w)
}

// failedLines are the run log's lines of fire time f whose run failed to
// start.
func linesOf(s *state.Schedule, f time.Time) []state.ScheduleRun {
	var out []state.ScheduleRun
	for _, r := range s.Runs {
		if r.Fire.Equal(f) {
			out = append(out, r)
		}
	}
	return out
}

// TestFireThatFailsToStartIsLoggedAndRetried: a fire whose run cannot be
// started is in the run log with the error and the number of tries, is
// not tried again before its backoff ends, is tried again after it (the
// same line updated, never a second one), and starts once the cause is
// gone: its line then names the run and says how many tries it took.
func TestFireThatFailsToStartIsLoggedAndRetried(t *testing.T) {
	onBoth(t, func(t *testing.T, inner schedule.Store) {
		st := &failingStarts{Store: inner}
		t0 := ts("2026-11-21T10:00:00Z")
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "hourly", Definition: def(t, "etl"), Every: time.Hour, Start: t0}, t0); err != nil {
			t.Fatal(err)
		}
		st.broken.Store(true)
		r, err := schedule.Tick(testbin.Context(t), st, t0, nil)
		var fe *schedule.FireError
		if !errors.As(err, &fe) || !errors.Is(err, errStoreDown) || r.Failed != 1 || r.Started != 0 {
			t.Fatalf("tick while the store fails: %+v, %v; want one fire that failed to start, with the store's error", r, err)
		}
		s := get(t, st, "hourly")
		lines := linesOf(s, t0)
		if len(lines) != 1 || !lines[0].Failed() || lines[0].Tries != 1 || !strings.Contains(lines[0].StartError, errStoreDown.Error()) ||
			!lines[0].RetryAt.Equal(t0.Add(schedule.RetryFirst)) || lines[0].RequestID != schedule.RequestID("hourly", t0) {
			t.Fatalf("run log after the failed fire: %+v", s.Runs)
		}
		if !s.LastFire.IsZero() || !s.NextFire.Equal(t0) {
			t.Errorf("the cursor moved past a fire that did not start: last %v, next %v", s.LastFire, s.NextFire)
		}
		if f := schedule.Failing(s); f == nil || !strings.Contains(schedule.LastError(s, nil), "failed to start (1 try; next try at 2026-11-21T10:00:30Z)") {
			t.Errorf("last error: %q", schedule.LastError(s, nil))
		}

		// Within the backoff: not tried, nothing written.
		before, v := st.tries.Load(), s.Version
		if r := tick(t, st, t0.Add(10*time.Second)); r.Failed != 0 || st.tries.Load() != before || get(t, st, "hourly").Version != v {
			t.Errorf("a tick within the backoff tried again (%+v, %d tries) or wrote", r, st.tries.Load()-before)
		}
		// After it: tried again, the same line updated.
		if _, err := schedule.Tick(testbin.Context(t), st, t0.Add(31*time.Second), nil); !errors.Is(err, errStoreDown) {
			t.Fatalf("second try: %v", err)
		}
		s = get(t, st, "hourly")
		if lines := linesOf(s, t0); len(lines) != 1 || lines[0].Tries != 2 || !lines[0].RetryAt.Equal(t0.Add(31*time.Second+2*schedule.RetryFirst)) {
			t.Fatalf("run log after the second try: %+v", s.Runs)
		}
		// The cause is gone: the next due try starts the run.
		st.broken.Store(false)
		if r := tick(t, st, t0.Add(2*time.Minute)); r.Started != 1 || r.Failed != 0 {
			t.Errorf("tick once the store works: %+v", r)
		}
		s = get(t, st, "hourly")
		lines = linesOf(s, t0)
		if len(lines) != 1 || lines[0].Failed() || lines[0].WorkflowExecID == "" || lines[0].Tries != 3 || len(s.Runs) != 1 {
			t.Errorf("run log once started: %+v", s.Runs)
		}
		if !s.LastFire.Equal(t0) || !s.NextFire.Equal(t0.Add(time.Hour)) || schedule.Failing(s) != nil {
			t.Errorf("after the start: last %v, next %v, failing %v", s.LastFire, s.NextFire, schedule.Failing(s))
		}
		same(t, "runs", runsOf(t, st, "etl"), []string{schedule.RequestID("hourly", t0)})
	})
}

// TestFailedFireDroppedByCatchup: under catch-up none, a fire that keeps
// failing to start is tried until it is later than the grace, then the
// catch-up rule skips it; its line says it is no longer tried, and the
// next fire time starts as usual.
func TestFailedFireDroppedByCatchup(t *testing.T) {
	onBoth(t, func(t *testing.T, inner schedule.Store) {
		st := &failingStarts{Store: inner}
		t0 := ts("2026-11-21T10:00:00Z")
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "none", Definition: def(t, "etl"), Every: 10 * time.Minute, Start: t0,
			Catchup: schedule.CatchupNone}, t0); err != nil {
			t.Fatal(err)
		}
		st.broken.Store(true)
		for _, at := range []time.Duration{0, 40 * time.Second, 100 * time.Second} {
			if _, err := schedule.Tick(testbin.Context(t), st, t0.Add(at), nil); !errors.Is(err, errStoreDown) {
				t.Fatalf("tick at +%s: %v, want the store's error", at, err)
			}
		}
		if r := tick(t, st, t0.Add(5*time.Minute)); r.Skipped != 1 {
			t.Errorf("tick past the grace: %+v, want the failed fire skipped", r)
		}
		s := get(t, st, "none")
		lines := linesOf(s, t0)
		var failed *state.ScheduleRun
		for i := range lines {
			if lines[i].Failed() {
				failed = &lines[i]
			}
		}
		if failed == nil || failed.Tries != 3 || !schedule.GaveUp(*failed) || !strings.Contains(schedule.LastError(s, nil), "not retried") {
			t.Fatalf("run log after the skip: %+v", s.Runs)
		}
		st.broken.Store(false)
		if r := tick(t, st, t0.Add(10*time.Minute)); r.Started != 1 {
			t.Errorf("the next fire time: %+v, want it started", r)
		}
		if s := get(t, st, "none"); schedule.Failing(s) != nil || schedule.LastError(s, nil) != "" {
			t.Errorf("a later started run still shows the old failure: %q", schedule.LastError(s, nil))
		}
	})
}

// TestTokenRunThatFailsToStartIsRetried: a token trigger's due run that
// fails to start stays pending, logged with its error, while completions
// are still counted; it starts once the cause is gone.
func TestTokenRunThatFailsToStartIsRetried(t *testing.T) {
	onBoth(t, func(t *testing.T, inner schedule.Store) {
		st := &failingStarts{Store: inner}
		up, err := definition.Parse("up.yaml", []byte("name: up\nactivities:\n  a: {command: [\"true\"]}\n"))
		if err != nil {
			t.Fatal(err)
		}
		complete := func() {
			t.Helper()
			id, _, err := workflow.Start(testbin.Context(t), inner, up, workflow.StartOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := inner.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted}); err != nil {
				t.Fatal(err)
			}
		}
		complete()
		now := time.Now().Truncate(time.Second)
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "after-up", Definition: def(t, "down"), After: "up", Start: now.Add(-time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
		st.broken.Store(true)
		if _, err := schedule.Tick(testbin.Context(t), st, now, nil); !errors.Is(err, errStoreDown) {
			t.Fatalf("tick: %v, want the store's error", err)
		}
		s := get(t, st, "after-up")
		if len(s.Pending) != 1 || s.Tokens != 1 || schedule.Failing(s) == nil {
			t.Fatalf("after the failed start: pending %v, tokens %d, run log %+v", s.Pending, s.Tokens, s.Runs)
		}
		complete()
		if r := tick(t, st, now.Add(5*time.Second)); r.Counted != 1 || r.Failed != 0 {
			t.Errorf("within the backoff: %+v, want the new completion counted and no try", r)
		}
		st.broken.Store(false)
		if r := tick(t, st, now.Add(time.Minute)); r.Started != 2 {
			t.Errorf("once the store works: %+v, want both runs started", r)
		}
		if s := get(t, st, "after-up"); len(s.Pending) != 0 || schedule.Failing(s) != nil {
			t.Errorf("after the start: pending %v, run log %+v", s.Pending, s.Runs)
		}
	})
}

// TestConcurrentSchedulersWithFailingStarts: 6 schedulers tick at once on
// a simulated clock while every third start fails (half of them after the
// write landed). Every fire time still starts exactly one run, and the run
// log holds one line per fire time.
func TestConcurrentSchedulersWithFailingStarts(t *testing.T) {
	onBoth(t, func(t *testing.T, inner schedule.Store) {
		st := &failingStarts{Store: inner}
		st.flaky.Store(true)
		t0 := ts("2026-11-21T10:00:00Z")
		end := t0.Add(15 * time.Minute)
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "flaky", Definition: def(t, "etl"), Every: time.Minute, Start: t0, End: end}, t0); err != nil {
			t.Fatal(err)
		}
		var now atomic.Int64
		now.Store(t0.Unix())
		stop := make(chan struct{})
		done := make(chan struct{})
		for i := 0; i < 6; i++ {
			go func() {
				defer func() { done <- struct{}{} }()
				for {
					select {
					case <-stop:
						return
					default:
					}
					// Fire errors are expected here; anything else is not.
					if _, err := schedule.Tick(testbin.Context(t), st, time.Unix(now.Load(), 0), nil); err != nil && !errors.Is(err, errStoreDown) {
						t.Errorf("a scheduler failed: %v", err)
						return
					}
				}
			}()
		}
		for m := 0; m <= 40; m++ { // 20 simulated seconds a step: every backoff passes
			time.Sleep(20 * time.Millisecond)
			now.Add(20)
		}
		close(stop)
		for i := 0; i < 6; i++ {
			<-done
		}
		st.flaky.Store(false)
		tick(t, st, end.Add(time.Hour))
		same(t, "runs", runsOf(t, st, "etl"), expected("flaky", t0, end, time.Minute))
		s := get(t, st, "flaky")
		seen := map[time.Time]bool{}
		for _, r := range s.Runs {
			if seen[r.Fire] {
				t.Errorf("two run log lines for %s: %+v", r.Fire, s.Runs)
			}
			seen[r.Fire] = true
			if r.WorkflowExecID == "" {
				t.Errorf("a line without its run: %+v", r)
			}
		}
	})
}

// TestParamsOfAnItemWithUndeclaredOnes: a schedule item whose params
// include one its definition does not declare (its value kept in the
// definition's defaults.env) fires with the declared ones as the run's
// params, the defaults of those it lacks, and the undeclared one in the
// environment only; schedule show shows all three as the run sees them.
func TestParamsOfAnItemWithUndeclaredOnes(t *testing.T) {
	st := newSQLite(t)
	t0 := ts("2026-11-21T10:00:00Z")
	d := defParams(t, "etl")
	d.Defaults.Env = map[string]string{"WHIMBREL_PARAM_EXTRA": "x"}
	if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "p", Definition: d, Every: time.Hour, Start: t0,
		Params: map[string]string{"region": "us"}}, t0); err != nil {
		t.Fatal(err)
	}
	s := get(t, st, "p")
	prev := s.Version
	s.Params = map[string]string{"region": "us", "extra": "x"}
	if err := st.PutSchedule(testbin.Context(t), s, prev, ""); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"region": "us", "day": "mon", "extra": "x"}
	if v, err := schedule.Show(testbin.Context(t), st, "p"); err != nil || !maps.Equal(v.Params, want) {
		t.Errorf("Show: params %v (%v), want %v", v.Params, err, want)
	}
	tick(t, st, t0)
	r, ok, err := schedule.LastRun(testbin.Context(t), st, get(t, st, "p"))
	if err != nil || !ok {
		t.Fatalf("LastRun: %v %v", ok, err)
	}
	w, err := st.GetWorkflow(testbin.Context(t), r.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	params, err := definition.StoredParams(w.Params)
	if err != nil || !maps.Equal(params, map[string]string{"region": "us", "day": "mon"}) {
		t.Errorf("the run's params: %v (%v), want region us and day's default", params, err)
	}
	stored, err := definition.FromJSON(w.Definition)
	if err != nil || stored.Effective("a").Env["WHIMBREL_PARAM_EXTRA"] != "x" {
		t.Errorf("the undeclared param is not in the run's environment (%v)", err)
	}
}
