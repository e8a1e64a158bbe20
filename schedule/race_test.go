package schedule_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// pausedCursor holds its first PutSchedule until released: a scheduler
// that started a run and has not moved the cursor yet.
type pausedCursor struct {
	schedule.Store
	once             sync.Once
	reached, release chan struct{}
}

func (p *pausedCursor) PutSchedule(ctx context.Context, s *state.Schedule, prev int, token string) error {
	p.once.Do(func() { close(p.reached); <-p.release })
	return p.Store.PutSchedule(ctx, s, prev, token)
}

// afterLookup runs hook once, after its first GetRequest has read.
type afterLookup struct {
	schedule.Store
	once sync.Once
	hook func()
}

func (a *afterLookup) GetRequest(ctx context.Context, id, name string) (*state.WorkflowRequest, error) {
	r, err := a.Store.GetRequest(ctx, id, name)
	a.once.Do(a.hook)
	return r, err
}

// TestCatchupSkipRacingAStartLogsTheRun: scheduler A, on time, starts
// 00:00; before it moves the cursor, scheduler B, later, looks for 00:00's
// run (none yet), and its catch-up latest skips 00:00 and 01:00 and fires
// 02:00. A's run of 00:00 stands (the request ID made it once): the run
// log must show it, not only the skip.
func TestCatchupSkipRacingAStartLogsTheRun(t *testing.T) {
	onBoth(t, func(t *testing.T, st schedule.Store) {
		t0 := ts("2026-11-21T00:00:00Z")
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "s", Definition: def(t, "etl"), Cron: "@hourly",
			Catchup: "latest", Start: t0}, t0); err != nil {
			t.Fatal(err)
		}
		a := &pausedCursor{Store: st, reached: make(chan struct{}), release: make(chan struct{})}
		aDone := make(chan error, 1)
		var ra schedule.Report
		b := &afterLookup{Store: st, hook: func() {
			go func() {
				var err error
				ra, err = schedule.Tick(testbin.Context(t), a, t0.Add(10*time.Second), nil)
				aDone <- err
			}()
			<-a.reached
		}}
		if _, err := schedule.Tick(testbin.Context(t), b, t0.Add(2*time.Hour+30*time.Second), nil); err != nil {
			t.Fatal(err)
		}
		close(a.release)
		if err := <-aDone; err != nil {
			t.Fatal(err)
		}
		same(t, "runs", runsOf(t, st, "etl"), []string{"s@2026-11-21T00:00:00Z", "s@2026-11-21T02:00:00Z"})
		if ra.Started != 1 {
			t.Errorf("A's report %+v: want the run it started counted", ra)
		}
		logged := map[string]string{}
		for _, r := range get(t, st, "s").Runs {
			if r.RequestID != "" {
				logged[r.RequestID] = r.WorkflowExecID
			}
		}
		for _, id := range runsOf(t, st, "etl") {
			if logged[id] == "" {
				t.Errorf("run %s is not in the run log %v", id, logged)
			}
		}
		// A tick later changes nothing.
		tick(t, st, t0.Add(2*time.Hour+40*time.Second))
		if n := len(get(t, st, "s").Runs); n != 3 {
			t.Errorf("run log of %d lines, want 3 (the skip, 02:00, 00:00)", n)
		}
	})
}
