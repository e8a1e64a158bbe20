package web

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// pageCost polls path from pages open pages, as their script does (every
// PollInterval, with the ETag it holds, the k-th page offset by
// k*PollInterval/pages), for one minute of a test clock, and returns what
// the store was asked for during that minute.
func pageCost(t *testing.T, st counted, path string, pages int) (refreshes, calls, items int) {
	t.Helper()
	clk := &clock{now: time.Now()}
	// The test counts reads, not how fast they are: a store read that
	// takes longer than the default bound on a loaded machine must not
	// turn into a 504 here.
	s, c := serve(t, Options{Store: st, Now: clk.Now, StoreTimeout: time.Minute})
	auth := bearer(testToken)
	etags := make([]string, pages)
	get := func(k int) {
		a := c.do("GET", path, nil, func(r *http.Request) {
			auth(r)
			if etags[k] != "" {
				r.Header.Set("If-None-Match", etags[k])
			}
		})
		switch a.code {
		case http.StatusOK:
			etags[k] = a.header.Get("ETag")
		case http.StatusNotModified:
		default:
			t.Fatalf("GET %s: %d", path, a.code)
		}
	}
	for k := range pages { // the pages are opened
		get(k)
	}
	calls0, items0 := st.total()
	loads0 := s.reads.started()
	step := PollInterval / time.Duration(pages)
	for elapsed := time.Duration(0); elapsed < time.Minute; elapsed += step {
		clk.advance(step)
		get(int(elapsed/step) % pages)
	}
	calls1, items1 := st.total()
	return s.reads.started() - loads0, calls1 - calls0, items1 - items0
}

// counted is a store that counts what it is asked.
type counted interface {
	Store
	total() (calls, items int)
}

// TestIdlePageCost measures what an open page that nobody touches costs
// the store in a minute (BENCHMARKS.md quotes it; run it with
// go test -run TestIdlePageCost -v ./web/). Reads are shared by every page
// and client for DefaultRefresh, so many open pages cost no more than about
// one read per DefaultRefresh; a settled execution is read once and never
// again, and its page stops polling.
func TestIdlePageCost(t *testing.T) {
	perMinute := int(time.Minute / PollInterval)
	ceiling := int(time.Minute/DefaultRefresh) + 1
	for _, tc := range []struct {
		name          string
		settled       bool
		pages         int
		list          bool
		schedules     int
		min, max      int // refreshes in the minute
		callsPerFresh int
	}{
		{name: "running workflow, 1 page", pages: 1, min: perMinute - 1, max: perMinute + 1, callsPerFresh: 2},
		{name: "running workflow, 5 pages", pages: 5, min: perMinute, max: ceiling, callsPerFresh: 2},
		{name: "settled workflow, 5 pages", settled: true, pages: 5, min: 0, max: 0},
		{name: "listing, 1 page", list: true, pages: 1, min: perMinute - 1, max: perMinute + 1, callsPerFresh: 1},
		// The schedules: one read of them all and one of each last run.
		{name: "schedules page, 3 schedules, 1 page", schedules: 3, pages: 1, min: perMinute - 1, max: perMinute + 1, callsPerFresh: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := sqliteStore(t)
			id := start(t, base, etl)
			if tc.settled {
				for _, n := range []string{"extract-orders", "extract-customers", "extract-events", "clean-orders", "sessionize", "join", "report", "publish"} {
					claim(t, base, id, n)
					finish(t, base, id, n, 0, "")
				}
			} else {
				claim(t, base, id, "extract-orders")
			}
			var st counted = newCounting(base)
			path := "/fragments/workflows/" + url.PathEscape(id)
			if tc.list {
				path = "/fragments/workflows"
			}
			if tc.schedules > 0 {
				st = scheduled(t, base, tc.schedules)
				path = "/fragments/schedules"
			}
			refreshes, calls, items := pageCost(t, st, path, tc.pages)
			t.Logf("%s: in one minute, %d reads (%d store calls, %d items)", tc.name, refreshes, calls, items)
			if refreshes < tc.min || refreshes > tc.max {
				t.Errorf("%d reads in a minute, want %d to %d", refreshes, tc.min, tc.max)
			}
			if tc.callsPerFresh > 0 && calls != refreshes*tc.callsPerFresh {
				t.Errorf("%d store calls for %d reads, want %d each", calls, refreshes, tc.callsPerFresh)
			}
		})
	}
}

// TestIdlePageCostOnDynamoDB states the same minute in DynamoDB read units:
// a running execution of 8 activities, one open page.
func TestIdlePageCostOnDynamoDB(t *testing.T) {
	var mu sync.Mutex
	units := 0.0
	base := dynamotest.NewStore(t, dynamodb.Options{Capacity: func(c dynamodb.Capacity) {
		mu.Lock()
		units += c.Total
		mu.Unlock()
	}})
	id := start(t, base, etl)
	claim(t, base, id, "extract-orders")
	mu.Lock()
	units = 0
	mu.Unlock()
	st := newCounting(base)
	// pageCost counts from after the page opened; so does this, roughly:
	// one read of the opening is subtracted below.
	refreshes, calls, items := pageCost(t, st, "/fragments/workflows/"+url.PathEscape(id), 1)
	mu.Lock()
	total := units
	mu.Unlock()
	perRead := total / float64(refreshes+1)
	t.Logf("DynamoDB, running workflow of 8 activities, 1 page: in one minute %d reads (%d store calls, %d items), %.1f read units (%.2f per read)",
		refreshes, calls, items, total-perRead, perRead)
	if refreshes == 0 || math.IsNaN(perRead) || perRead <= 0 {
		t.Fatalf("no read units reported (%v over %d reads)", total, refreshes)
	}
	if perRead > 12 {
		t.Errorf("%.2f read units per read of 8 activities, want about 9.5 (1 workflow, a keys-only query, 8 items)", perRead)
	}
}

// countingSchedules counts the schedules' reads too.
type countingSchedules struct {
	*countingStore
	sched state.Schedules
}

func (c countingSchedules) PutSchedule(ctx context.Context, s *state.Schedule, prev int, token string) error {
	c.count("PutSchedule")
	return c.sched.PutSchedule(ctx, s, prev, token)
}

func (c countingSchedules) GetSchedule(ctx context.Context, name string) (*state.Schedule, error) {
	c.count("GetSchedule")
	return c.sched.GetSchedule(ctx, name)
}

func (c countingSchedules) DeleteSchedule(ctx context.Context, name string, prev int) error {
	c.count("DeleteSchedule")
	return c.sched.DeleteSchedule(ctx, name, prev)
}

func (c countingSchedules) Schedules(ctx context.Context) ([]*state.Schedule, error) {
	c.count("Schedules")
	return c.sched.Schedules(ctx)
}

func (c countingSchedules) DueSchedules(ctx context.Context, now time.Time) ([]string, error) {
	c.count("DueSchedules")
	return c.sched.DueSchedules(ctx, now)
}

// scheduled sets n schedules of etl on base, each fired once (a running
// last run), and returns base counting what it is asked from now on.
func scheduled(t *testing.T, base state.Store, n int) countingSchedules {
	t.Helper()
	ss := base.(schedule.Store)
	d, err := definition.Parse("test.yaml", []byte(etl))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-time.Minute).Truncate(time.Minute)
	for i := range n {
		if _, err := schedule.Set(ctx, ss, schedule.Spec{Name: fmt.Sprintf("every-%d", i), Definition: d, Every: time.Hour, Start: t0}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := schedule.Tick(ctx, ss, t0, nil); err != nil {
		t.Fatal(err)
	}
	return countingSchedules{countingStore: newCounting(base), sched: ss}
}
