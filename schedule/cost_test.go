package schedule_test

import (
	"context"
	"slices"

	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
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
	if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "one", Definition: d, Every: time.Hour, Start: now.Add(-time.Minute)}, now); err != nil {
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
				if err := st.PutSchedule(testbin.Context(t), s, 0, ""); err != nil {
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
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: fmt.Sprintf("due-%d", i), Definition: d, Every: time.Hour,
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

// callCounter counts the store calls a token trigger's tick makes.
type callCounter struct {
	schedule.Store
	mu    sync.Mutex
	calls map[string]int
}

func (c *callCounter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
}

func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *callCounter) PutSchedule(ctx context.Context, s *state.Schedule, prev int, token string) error {
	c.add("PutSchedule")
	return c.Store.PutSchedule(ctx, s, prev, token)
}

func (c *callCounter) GetSchedule(ctx context.Context, name string) (*state.Schedule, error) {
	c.add("GetSchedule")
	return c.Store.GetSchedule(ctx, name)
}

func (c *callCounter) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	c.add("GetWorkflow")
	return c.Store.GetWorkflow(ctx, id)
}

func (c *callCounter) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	c.add("Workflows")
	return c.Store.Workflows(ctx, q)
}

// upstream writes an execution of workflow "up" started at start, and
// settles it as to unless to is RUNNING.
func upstream(t *testing.T, st schedule.Store, start time.Time, to state.WorkflowState) string {
	t.Helper()
	id := "up::" + uuid.NewString()
	if err := st.CreateWorkflow(testbin.Context(t), &state.NewWorkflow{Exec: state.WorkflowExec{WorkflowExecID: id, WorkflowName: "up",
		State: state.WorkflowRequested, StartTime: start, Definition: `{"name":"up"}`}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRequested},
		To: state.WorkflowRunning}); err != nil {
		t.Fatal(err)
	}
	if to != state.WorkflowRunning {
		if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning},
			To: to, At: start.Add(time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestAfterTickCostStaysBounded: one long-running upstream execution and
// 150 completed after it. The first tick counts the 150; the next ticks
// cost a few reads and no write, however many completions the running one
// has behind it; when it completes, it counts once.
func TestAfterTickCostStaysBounded(t *testing.T) {
	onBoth(t, func(t *testing.T, raw schedule.Store) {
		st := &callCounter{Store: raw, calls: map[string]int{}}
		now := state.Truncate(time.Now())
		long := upstream(t, st, now.Add(-time.Hour), state.WorkflowRunning)
		for i := 0; i < 150; i++ {
			upstream(t, st, now.Add(-50*time.Minute+time.Duration(i)*20*time.Second), state.WorkflowCompleted)
		}
		if _, err := schedule.Set(testbin.Context(t), st, schedule.Spec{Name: "many", Definition: def(t, "down"), After: "up", Threshold: 1000,
			Start: now.Add(-2 * time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
		st.take()
		if r := tick(t, st, now); r.Counted != 150 {
			t.Errorf("first tick counted %d, want 150", r.Counted)
		}
		t.Logf("first tick: %v", st.take())
		for i := 0; i < 2; i++ {
			r := tick(t, st, now)
			calls := st.take()
			t.Logf("tick %d: %v", i+2, calls)
			if r.Counted != 0 || calls["PutSchedule"] != 0 || calls["GetWorkflow"] > 1 || calls["Workflows"] > 1 {
				t.Errorf("tick %d counted %d with calls %v; want nothing counted, no write, a query and a read of the running one",
					i+2, r.Counted, calls)
			}
		}
		if s := get(t, st, "many"); s.Tokens != 150 || len(s.Counted) > 20 || !slices.Equal(s.Unsettled, []string{long}) {
			t.Errorf("tokens %d, %d remembered as counted, unsettled %v; want 150, the last AfterLag's, [%s]",
				s.Tokens, len(s.Counted), s.Unsettled, long)
		}
		if _, err := st.UpdateWorkflow(testbin.Context(t), long, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning},
			To: state.WorkflowCompleted}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			tick(t, st, now)
		}
		if s := get(t, st, "many"); s.Tokens != 151 || len(s.Unsettled) != 0 {
			t.Errorf("after the long one completed: tokens %d, unsettled %v; want 151, none", s.Tokens, s.Unsettled)
		}
	})
}
