package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// A fire time whose run fails to start (its definition no longer parses,
// its params are refused, the store fails) is logged in the run log with
// the error and the number of tries, and tried again by later ticks, the
// wait doubling from RetryFirst up to RetryMax, until it starts or the
// catch-up rule skips it. The cursor stays before it meanwhile, so later
// fire times wait behind it as they would behind a scheduler that was
// down.
const (
	RetryFirst = 30 * time.Second
	RetryMax   = 15 * time.Minute
)

// retryDelay is the wait after the tries-th failed try.
func retryDelay(tries int) time.Duration {
	d := RetryFirst
	for i := 1; i < tries && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// notRetriedNote begins the note of a run log line whose run failed to
// start and is no longer tried.
const notRetriedNote = "not retried: "

// GaveUp reports whether r is a fire time whose run failed to start and
// that no scheduler tries again: the catch-up rule skipped it, or the
// schedule was set with another trigger.
func GaveUp(r state.ScheduleRun) bool {
	return r.Failed() && strings.HasPrefix(r.Note, notRetriedNote)
}

// FireError is a fire time whose run failed to start this tick. The run
// log holds it, with the error and the tries; a later tick tries again
// from RetryAt.
type FireError struct {
	RequestID string
	Tries     int
	RetryAt   time.Time
	Err       error
}

func (e *FireError) Error() string {
	return fmt.Sprintf("start %s failed (try %d; next try at %s): %v", e.RequestID, e.Tries, e.RetryAt.UTC().Format(time.RFC3339), e.Err)
}

func (e *FireError) Unwrap() error { return e.Err }

// wallNow is when a scheduler does something, for the run log's "at":
// the tick's own time may be given (whimbrel schedule tick --now), and
// says only which fire times are due.
func wallNow() time.Time { return state.Truncate(time.Now()) }

// failedLine is the index of the run log line of fire time f whose run
// failed to start, or -1.
func failedLine(runs []state.ScheduleRun, f time.Time) int {
	for i, r := range runs {
		if r.Failed() && r.Fire.Equal(f) {
			return i
		}
	}
	return -1
}

// tryStart starts the run of fire time f unless its last failed try asks
// to wait (wait = true). A run that fails to start is recorded in the
// run log, replacing the line of its previous try, and returned as a
// *FireError; a started run's line takes the place of that line too
// (logStarted), so each fire time has one line.
//
// started holds the fire times this scheduler started in this tick: one
// whose cursor write lost to another scheduler's record of a failed try
// is not left waiting for the retry, since its run exists.
func tryStart(ctx context.Context, st Store, s *state.Schedule, f, now time.Time, started map[int64]bool) (id string, created, wait bool, err error) {
	tries := 1
	if i := failedLine(s.Runs, f); i >= 0 {
		if now.Before(s.Runs[i].RetryAt) && !started[f.Unix()] {
			return "", false, true, nil
		}
		tries = s.Runs[i].Tries + 1
	}
	id, created, err = start(ctx, st, s, f)
	if err == nil {
		started[f.Unix()] = true
	}
	if err == nil || ctx.Err() != nil {
		return id, created, false, err
	}
	fe := &FireError{RequestID: RequestID(s.Name, f), Tries: tries, RetryAt: state.Truncate(now.Add(retryDelay(tries))), Err: err}
	prev := s.Version
	dropLine(s, f)
	logRun(s, state.ScheduleRun{Fire: f, RequestID: fe.RequestID, At: wallNow(), StartError: err.Error(), Tries: tries, RetryAt: fe.RetryAt})
	if perr := st.PutSchedule(ctx, s, prev, ""); perr != nil {
		if errors.Is(perr, state.ErrConflict) {
			return "", false, false, perr // another scheduler moved first: read again
		}
		return "", false, false, fmt.Errorf("%w; recording it in the run log failed too: %v", fe, perr)
	}
	return "", false, false, fe
}

// dropLine removes the line of f's failed tries, if there is one.
func dropLine(s *state.Schedule, f time.Time) (tries int) {
	if i := failedLine(s.Runs, f); i >= 0 {
		tries = s.Runs[i].Tries
		s.Runs = slices.Delete(slices.Clone(s.Runs), i, i+1)
	}
	return tries
}

// logStarted logs the run of fire time f, in place of the line of its
// failed tries.
func logStarted(s *state.Schedule, r state.ScheduleRun) {
	if tries := dropLine(s, r.Fire); tries > 0 {
		r.Tries = tries + 1
	}
	logRun(s, r)
}

// giveUp marks the lines of fire times up to last whose runs failed to
// start as no longer tried, saying why.
func giveUp(s *state.Schedule, last time.Time, why string) {
	s.Runs = slices.Clone(s.Runs)
	for i := range s.Runs {
		if r := &s.Runs[i]; r.Failed() && !GaveUp(*r) && !r.Fire.After(last) {
			r.Note, r.RetryAt = notRetriedNote+why, time.Time{}
		}
	}
}
