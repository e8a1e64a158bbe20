package schedule_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// meter adds up what a store's calls consumed, by reads and writes.
type meter struct {
	mu            sync.Mutex
	reads, writes float64
	calls         int
}

var writeOps = map[string]bool{"PutSchedule": true, "DeleteSchedule": true, "CreateWorkflow": true, "UpdateWorkflow": true, "UpdateActivity": true}

func (m *meter) record(c dynamodb.Capacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if writeOps[c.Op] {
		m.writes += c.Total
	} else {
		m.reads += c.Total
	}
}

func (m *meter) take() (reads, writes float64, calls int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	reads, writes, calls = m.reads, m.writes, m.calls
	m.reads, m.writes, m.calls = 0, 0, 0
	return
}

// TestTickCost measures on DynamoDB Local what a tick costs: idle, with one
// fire, and with 10,000 schedules of which 10 are due; a tick reads the
// due index, so its cost must not grow with the schedules that are not
// due. The figures go to BENCHMARKS.md (make bench).
func TestTickCost(t *testing.T) {
	m := &meter{}
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: m.record})
	now := time.Now()
	line := func(what string, r schedule.Report, took time.Duration) (float64, float64) {
		reads, writes, calls := m.take()
		t.Logf("%s: %d started; %d store calls, %.1f read units, %.1f write units, took %s",
			what, r.Started, calls, reads, writes, took.Round(time.Millisecond))
		return reads, writes
	}
	measure := func(what string) (float64, float64) {
		m.take()
		began := time.Now()
		r := tick(t, st, now)
		return line(what, r, time.Since(began))
	}
	idleReads, idleWrites := measure("idle tick, no schedules")
	if idleWrites != 0 {
		t.Errorf("an idle tick wrote %.1f units", idleWrites)
	}

	d := def(t, "etl")
	if _, err := schedule.Set(ctx(t), st, schedule.Spec{Name: "one", Definition: d, Every: time.Hour, Start: now.Add(-time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	measure("one fire (a workflow of 2 activities)")

	// 9,990 schedules not due, 10 due.
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 9990; i += 16 {
				s := &state.Schedule{Name: fmt.Sprintf("later-%05d", i), WorkflowName: "etl", Definition: d.JSON(), Cron: "0 3 * * *",
					TimeZone: "UTC", Catchup: "all", MaxCatchup: 50, Start: now, SetTime: now, NextFire: now.Add(time.Duration(1+i%1000) * time.Hour)}
				if err := st.PutSchedule(ctx(t), s, 0, ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if _, err := schedule.Set(ctx(t), st, schedule.Spec{Name: fmt.Sprintf("due-%d", i), Definition: d, Every: time.Hour,
			Start: now.Add(-time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("(10,000 schedules written in %s)", time.Since(began).Round(time.Second))
	m.take()
	measure("10,000 schedules, 10 due: the tick that fires them")
	bigReads, bigWrites := measure("10,000 schedules, none due: an idle tick")
	if bigReads != idleReads || bigWrites != 0 {
		t.Errorf("an idle tick over 10,000 schedules cost %.1f read and %.1f write units, want the %.1f of an empty table",
			bigReads, bigWrites, idleReads)
	}
}
