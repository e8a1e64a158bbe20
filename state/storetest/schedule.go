package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// RunSchedules runs the suite of state.Schedules, which every Store also
// is.
func RunSchedules(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTripAndVersions", testScheduleVersions},
		{"TokenCountsOnce", testScheduleToken},
		{"DueIndex", testDueSchedules},
		{"Delete", testScheduleDelete},
		{"ConcurrentWritersOneWins", testScheduleRace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

func schedules(t *testing.T, st state.Store) state.Schedules {
	t.Helper()
	s, ok := st.(state.Schedules)
	if !ok {
		t.Fatalf("%T is no state.Schedules", st)
	}
	return s
}

func aSchedule(name string) *state.Schedule {
	now := state.Truncate(time.Now())
	return &state.Schedule{
		Name: name, WorkflowName: "etl", Definition: `{"name":"etl"}`, Cron: "0 2 * * *", TimeZone: "Europe/Berlin",
		Catchup: "all", MaxCatchup: 50, Start: now.Add(-time.Hour), End: now.Add(24 * time.Hour), SetTime: now,
		NextFire: now.Add(time.Hour), LastFire: now.Add(-time.Minute), Params: map[string]string{"day": "mon"},
		Pending: []time.Time{now.Truncate(time.Second)}, Counted: []string{"up::2", "up::1"}, Unsettled: []string{"up::0"},
		Runs: []state.ScheduleRun{
			{Fire: now.Add(time.Minute), RequestID: name + "@y", At: now, StartError: "start etl: \x1b[31m<script>", Tries: 3, RetryAt: now.Add(2 * time.Minute)},
			{Fire: now, RequestID: name + "@x", WorkflowExecID: "etl::1", At: now, Note: "n", Tries: 2},
		},
	}
}

func testScheduleVersions(t *testing.T, h Harness) {
	st := h.New(t)
	ss := schedules(t, st)
	s := aSchedule("nightly")
	if err := ss.PutSchedule(testbin.Context(t), s, 0, ""); err != nil {
		t.Fatalf("PutSchedule: %v", err)
	}
	if s.Version != 1 {
		t.Errorf("version after the first write = %d, want 1", s.Version)
	}
	got, err := ss.GetSchedule(testbin.Context(t), "nightly")
	if err != nil {
		t.Fatalf("GetSchedule: %v", err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("GetSchedule =\n%+v\nwant\n%+v", got, s)
	}
	// A second creation and a stale version are refused, and write nothing.
	again := aSchedule("nightly")
	again.Cron = "5 * * * *"
	if err := ss.PutSchedule(testbin.Context(t), again, 0, ""); !errors.Is(err, state.ErrConflict) {
		t.Errorf("second creation: %v, want a conflict", err)
	}
	if err := ss.PutSchedule(testbin.Context(t), again, 1, ""); err != nil {
		t.Fatalf("PutSchedule at version 1: %v", err)
	}
	err = ss.PutSchedule(testbin.Context(t), aSchedule("nightly"), 1, "")
	if ce := conflict(t, err); ce.Kind != "schedule" || ce.State != "at version 2" {
		t.Errorf("stale write: %+v, want a conflict naming version 2", ce)
	}
	got, _ = ss.GetSchedule(testbin.Context(t), "nightly")
	if got.Cron != "5 * * * *" || got.Version != 2 {
		t.Errorf("after a refused write: cron %q version %d, want the second write's", got.Cron, got.Version)
	}
	if _, err := ss.GetSchedule(testbin.Context(t), "nope"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetSchedule of a missing schedule: %v, want ErrNotFound", err)
	}
	all, err := ss.Schedules(testbin.Context(t))
	if err != nil || len(all) != 1 || all[0].Name != "nightly" {
		t.Errorf("Schedules = %v, %v; want nightly alone", all, err)
	}
}

func testScheduleToken(t *testing.T, h Harness) {
	st := h.New(t)
	ss := schedules(t, st)
	s := aSchedule("after-up")
	s.Cron, s.After, s.Threshold = "", "up", 2
	if err := ss.PutSchedule(testbin.Context(t), s, 0, ""); err != nil {
		t.Fatal(err)
	}
	s.Tokens = 1
	if err := ss.PutSchedule(testbin.Context(t), s, 1, "up::a"); err != nil {
		t.Fatalf("count a token: %v", err)
	}
	// The same execution again, even at the current version, is refused
	// and changes nothing.
	s2 := *s
	s2.Tokens = 2
	if err := ss.PutSchedule(testbin.Context(t), &s2, 2, "up::a"); !errors.Is(err, state.ErrExists) {
		t.Errorf("counting a token again: %v, want ErrExists", err)
	}
	got, _ := ss.GetSchedule(testbin.Context(t), "after-up")
	if got.Tokens != 1 || got.Version != 2 {
		t.Errorf("after a replayed token: tokens %d version %d, want 1 and 2", got.Tokens, got.Version)
	}
	// A stale version with a new token writes neither.
	s3 := *got
	s3.Tokens = 2
	if err := ss.PutSchedule(testbin.Context(t), &s3, 1, "up::b"); !errors.Is(err, state.ErrConflict) {
		t.Errorf("stale token write: %v, want a conflict", err)
	}
	if err := ss.PutSchedule(testbin.Context(t), &s3, 2, "up::b"); err != nil {
		t.Errorf("token b after the stale attempt: %v (the stale attempt must not have recorded it)", err)
	}
	all, _ := ss.Schedules(testbin.Context(t))
	if len(all) != 1 {
		t.Errorf("Schedules lists %d items, want 1: tokens are no schedules", len(all))
	}
}

func testDueSchedules(t *testing.T, h Harness) {
	st := h.New(t)
	ss := schedules(t, st)
	now := state.Truncate(time.Now())
	var want []string
	for i := 0; i < 12; i++ {
		s := aSchedule(fmt.Sprintf("s%02d", i))
		switch i % 3 {
		case 0: // due
			s.NextFire = now.Add(-time.Duration(i) * time.Minute)
			want = append(want, s.Name)
		case 1: // later
			s.NextFire = now.Add(time.Minute)
		case 2: // none: paused or over
			s.NextFire = time.Time{}
		}
		if err := ss.PutSchedule(testbin.Context(t), s, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ss.DueSchedules(testbin.Context(t), now)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DueSchedules = %v, want %v", got, want)
	}
	// Moving a schedule's next fire time moves it out of the index.
	s, _ := ss.GetSchedule(testbin.Context(t), "s00")
	s.NextFire = time.Time{}
	if err := ss.PutSchedule(testbin.Context(t), s, s.Version, ""); err != nil {
		t.Fatal(err)
	}
	got, _ = ss.DueSchedules(testbin.Context(t), now)
	slices.Sort(got)
	if !reflect.DeepEqual(got, want[1:]) {
		t.Errorf("DueSchedules after s00 left = %v, want %v", got, want[1:])
	}
}

func testScheduleDelete(t *testing.T, h Harness) {
	st := h.New(t)
	ss := schedules(t, st)
	s := aSchedule("gone")
	s.NextFire = time.Now().Add(-time.Hour)
	if err := ss.PutSchedule(testbin.Context(t), s, 0, ""); err != nil {
		t.Fatal(err)
	}
	// Tokens, more than one DynamoDB transaction deletes, and another
	// schedule's token of the same execution.
	const tokens = 105
	for i := 0; i < tokens; i++ {
		if err := ss.PutSchedule(testbin.Context(t), s, s.Version, fmt.Sprintf("up::%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	other := aSchedule("gone-not")
	if err := ss.PutSchedule(testbin.Context(t), other, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := ss.PutSchedule(testbin.Context(t), other, 1, "up::0"); err != nil {
		t.Fatal(err)
	}
	if err := ss.DeleteSchedule(testbin.Context(t), "gone", 7); !errors.Is(err, state.ErrConflict) {
		t.Errorf("delete at a stale version: %v, want a conflict", err)
	}
	if err := ss.DeleteSchedule(testbin.Context(t), "gone", 1+tokens); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	// Its tokens went with it: a schedule set again under the name may
	// count those executions; the other schedule's token stays.
	again := aSchedule("gone")
	if err := ss.PutSchedule(testbin.Context(t), again, 0, ""); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, tokens - 1} {
		if err := ss.PutSchedule(testbin.Context(t), again, again.Version, fmt.Sprintf("up::%d", i)); err != nil {
			t.Errorf("token up::%d after the schedule was deleted and set again: %v, want it gone", i, err)
		}
	}
	if err := ss.PutSchedule(testbin.Context(t), other, other.Version, "up::0"); !errors.Is(err, state.ErrExists) {
		t.Errorf("the other schedule's token after the delete: %v, want ErrExists", err)
	}
	if err := ss.DeleteSchedule(testbin.Context(t), "gone", again.Version); err != nil {
		t.Fatalf("DeleteSchedule: %v", err)
	}
	if _, err := ss.GetSchedule(testbin.Context(t), "gone"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("after delete: %v, want ErrNotFound", err)
	}
	if due, _ := ss.DueSchedules(testbin.Context(t), time.Now()); len(due) != 0 {
		t.Errorf("a deleted schedule is still due: %v", due)
	}
	if err := ss.DeleteSchedule(testbin.Context(t), "gone", 1); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("deleting again: %v, want ErrNotFound", err)
	}
}

func testScheduleRace(t *testing.T, h Harness) {
	st := h.New(t)
	ss := schedules(t, st)
	if err := ss.PutSchedule(testbin.Context(t), aSchedule("race"), 0, ""); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := aSchedule("race")
			s.Tokens = i + 1
			errs[i] = ss.PutSchedule(testbin.Context(t), s, 1, "")
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, state.ErrConflict):
			t.Errorf("a racing write: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers at version 1 won, want exactly 1", won)
	}
}
