// Package schedule starts workflows by the clock (cron expressions in a
// time zone, fixed intervals) and after another workflow's completions
// (tokens, as Waterwheel's), with catch-up after downtime and a run log.
//
// It is a wing on the core: a fire is workflow.Start with the request ID
// NAME@T (T the fire time in UTC, RFC 3339), so a duplicate start is
// refused by the request ID, and then a conditional write of the
// schedule's cursor. Any number of schedulers (every whimbrel-monitor,
// whimbrel schedule tick, the Lambda on an EventBridge rule) may fire at
// once: none is special, each fire time starts exactly one run, and a
// scheduler that dies between its writes leaves what the next tick
// finishes.
package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what schedules need of a store: the schedule items, and the
// executions to start, to count (Workflows) and to find started already
// (GetRequest). checkKnown also asks whether it is a state.Inbox, which
// knows the registered workflows: an optional capability, not part of it.
type Store interface {
	state.Schedules
	workflow.Starter
	Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error)
	GetRequest(ctx context.Context, workflowRequestID, workflowName string) (*state.WorkflowRequest, error)
}

// The catch-up rules: what a schedule does with fire times it missed
// (while no scheduler ran, or while it was paused).
const (
	CatchupAll    = "all"    // start every missed fire time, oldest first (at most MaxCatchup)
	CatchupLatest = "latest" // start only the most recent
	CatchupNone   = "none"   // start none; fire from now on
)

// Defaults.
const (
	DefaultMaxCatchup = 50
	DefaultCatchup    = CatchupAll
	// Grace is how late a fire may start under CatchupNone and still count
	// as on time rather than missed: a little more than the interval of an
	// EventBridge rule or a monitor's sweep.
	Grace = 2 * time.Minute
	// RunLogSize is how many fires and skips the run log keeps.
	RunLogSize = 20
	// AfterLag is how far before its watermark a token trigger looks again
	// for upstream executions, so that one written late to the index is
	// still counted.
	AfterLag = 5 * time.Minute
	// maxCounted bounds how many counted executions a schedule remembers
	// (those its next look may see again), so that seeing them again
	// costs no write. Beyond it (more completions than that within
	// AfterLag), the token items still count each once, at the cost of a
	// refused write.
	maxCounted = 1000
)

// Spec is what `whimbrel schedule set` gives.
type Spec struct {
	Name       string
	Definition *definition.Workflow
	Cron       string
	Every      time.Duration
	After      string
	Threshold  int // default 1
	TimeZone   string
	Catchup    string
	MaxCatchup int
	// Overlap is what a fire does while the previous run still runs
	// (overlap.go); empty: OverlapAllow.
	Overlap string
	Start   time.Time // zero: now
	End     time.Time // zero: none
	// Params are the run's params as given (--param, --params-file),
	// checked against the definition's declarations as whimbrel start
	// checks them; the schedule keeps them with the declared defaults.
	Params map[string]string
}

// Warnings says what a schedule's settings may do that its owner may not
// expect. Under CatchupNone a time trigger starts a fire time only if a
// scheduler ticks within Grace of it: with schedulers ticking less often
// (a monitor's --interval, an EventBridge rule's rate), most fires are
// skipped, each logged in the run log.
func Warnings(s *state.Schedule) []string {
	if s.After != "" || s.Catchup != CatchupNone {
		return nil
	}
	return []string{fmt.Sprintf("--catchup none starts a fire time only if a scheduler ticks within %s of it, and skips it otherwise: "+
		"tick at least every %s (whimbrel-monitor --interval, the EventBridge rule's rate), or use --catchup latest", Grace, Grace/2)}
}

// SpecError is a schedule that cannot be set as given: no trigger or
// more than one, a bad cron expression, time zone, catch-up rule, time
// range, upstream workflow, or params the definition does not take. It
// names the flag and what it wants; nothing is written.
type SpecError struct{ Err error }

func (e *SpecError) Error() string { return e.Err.Error() }

// Unwrap returns the cause, e.g. a *definition.ParamsError.
func (e *SpecError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return &SpecError{Err: fmt.Errorf(format, args...)}
}

// The variables every activity of a scheduled run has.
const (
	EnvSchedule = "WHIMBREL_SCHEDULE"  // the schedule's name
	EnvFireTime = "WHIMBREL_FIRE_TIME" // the fire time, RFC 3339 UTC
)

// RequestID is the workflow request ID of the run for fire time t.
func RequestID(name string, t time.Time) string {
	return name + "@" + t.UTC().Format(time.RFC3339)
}

// Set creates or replaces a schedule. A replaced schedule keeps its cursor,
// tokens, pause and run log. With the same trigger and no explicit start,
// it keeps its start too, and a token trigger its watermark: the fire
// times it missed are the catch-up rule's, and completions since the last
// tick still count. With a new trigger, fires start from the new start
// (default now), and the run log says which due fire times of the old
// trigger were not started. Bad input returns an error naming it, and
// nothing is written.
func Set(ctx context.Context, st Store, spec Spec, now time.Time) (*state.Schedule, error) {
	s, err := build(ctx, st, spec, now)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		old, err := st.GetSchedule(ctx, s.Name)
		prev := 0
		switch {
		case errors.Is(err, state.ErrNotFound):
			if s.After != "" {
				s.AfterSince = s.Start
			}
		case err != nil:
			return nil, fmt.Errorf("set schedule %s: %w", s.Name, err)
		default:
			prev = old.Version
			s.LastFire, s.Tokens, s.Fired, s.Pending, s.Runs = old.LastFire, old.Tokens, old.Fired, old.Pending, old.Runs
			s.Paused = old.Paused
			s.Counted, s.Unsettled, s.AfterSince = nil, nil, time.Time{}
			same := old.Cron == s.Cron && old.Every == s.Every && old.After == s.After && old.TimeZone == s.TimeZone
			if same && spec.Start.IsZero() {
				s.Start = old.Start
			}
			switch {
			case s.After != "" && old.After == s.After:
				// The same upstream: keep the watermark (never before the
				// start) and the memory of what was counted.
				s.AfterSince, s.Counted, s.Unsettled = old.AfterSince, old.Counted, old.Unsettled
				if s.AfterSince.Before(s.Start) {
					s.AfterSince = s.Start
				}
			case s.After != "":
				s.AfterSince = s.Start
			}
			logDropped(old, s, now)
			retryNow(s, same || (old.After != "" && s.After != ""))
		}
		s.NextFire = nextFire(s)
		err = st.PutSchedule(ctx, s, prev, "")
		if errors.Is(err, state.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("set schedule %s: %w", s.Name, err)
		}
		return s, nil
	}
}

// retryNow makes the next tick try again at once to start the fire times
// whose runs failed to start: setting a schedule again is how its owner
// fixes what made them fail. A new trigger may not fire them at all: the
// line says so.
func retryNow(s *state.Schedule, keeps bool) {
	s.Runs = slices.Clone(s.Runs)
	for i := range s.Runs {
		r := &s.Runs[i]
		if !r.Failed() || GaveUp(*r) {
			continue
		}
		r.RetryAt = time.Time{}
		if !keeps {
			r.Note = notRetriedNote + "the schedule was set with another trigger"
		}
	}
}

// setAgainNote begins the run log line of logDropped, which records no
// move of the cursor.
const setAgainNote = "set again:"

// logDropped says in the run log which due fire times of a time trigger
// being replaced the new one will not start (they are neither started nor
// skipped by a catch-up rule otherwise): those before the new trigger's
// first due fire time, or all of them when the trigger changed.
func logDropped(old, s *state.Schedule, now time.Time) {
	if old.After != "" || old.Paused {
		return // a token trigger's runs are its tokens; a paused one fires nothing until resumed
	}
	oc, err := clockOf(old)
	if err != nil {
		return
	}
	var until time.Time
	if s.After == "" && old.Cron == s.Cron && old.Every == s.Every && old.TimeZone == s.TimeZone {
		c, err := clockOf(s)
		if err != nil {
			return
		}
		until = c.first(s.LastFire) // the same trigger: what it still fires is not dropped
	}
	n := 0
	var first, last time.Time
	for f := oc.first(old.LastFire); !f.IsZero() && !f.After(now) && (until.IsZero() || f.Before(until)) && n < 100_000; f = oc.next(f) {
		if n == 0 {
			first = f
		}
		last = f
		n++
	}
	if n == 0 {
		return
	}
	logRun(s, state.ScheduleRun{Fire: last, At: state.Truncate(now), Note: fmt.Sprintf(
		setAgainNote+" %d due fire time(s) of the previous trigger from %s to %s not started",
		n, first.Format(time.RFC3339), last.Format(time.RFC3339))})
}

// build checks a spec and turns it into a schedule item.
func build(ctx context.Context, st Store, spec Spec, now time.Time) (*state.Schedule, error) {
	if err := checkName(spec.Name); err != nil {
		return nil, err
	}
	if spec.Definition == nil {
		return nil, errors.New("schedule: no workflow definition given")
	}
	var given []string
	for flag, set := range map[string]bool{"--cron": spec.Cron != "", "--every": spec.Every != 0, "--after": spec.After != ""} {
		if set {
			given = append(given, flag)
		}
	}
	sort.Strings(given)
	const triggers = "--cron EXPR, --every DURATION or --after WORKFLOW"
	switch {
	case len(given) == 0:
		return nil, invalid("no trigger: give one of " + triggers)
	case len(given) > 1:
		return nil, invalid("%s conflict: give exactly one trigger of %s", strings.Join(given, " and "), triggers)
	}
	s := &state.Schedule{
		Name: spec.Name, WorkflowName: spec.Definition.Name,
		Cron: strings.TrimSpace(spec.Cron), Every: state.Interval(spec.Every), After: spec.After,
		TimeZone: spec.TimeZone, Catchup: spec.Catchup, MaxCatchup: spec.MaxCatchup,
		Start: state.Truncate(spec.Start), End: state.Truncate(spec.End), SetTime: state.Truncate(now),
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if _, err := time.LoadLocation(s.TimeZone); err != nil || s.TimeZone == "Local" {
		return nil, invalid("--timezone %q is not an IANA time zone: give one such as Europe/Berlin or America/New_York", spec.TimeZone)
	}
	if s.Catchup == "" {
		s.Catchup = DefaultCatchup
	}
	if s.Catchup != CatchupAll && s.Catchup != CatchupLatest && s.Catchup != CatchupNone {
		return nil, invalid("--catchup %q: give all, latest or none", spec.Catchup)
	}
	if s.MaxCatchup == 0 {
		s.MaxCatchup = DefaultMaxCatchup
	}
	ov, err := checkOverlap(spec.Overlap)
	if err != nil {
		return nil, err
	}
	s.Overlap = ov
	if s.MaxCatchup < 1 {
		return nil, invalid("--max-catchup %d: give at least 1", spec.MaxCatchup)
	}
	if spec.Start.IsZero() {
		s.Start = state.Truncate(now)
	}
	if !s.End.IsZero() && s.End.Before(s.Start) {
		return nil, invalid("--end %s is before the start %s: give an end after the start", s.End.Format(time.RFC3339), s.Start.Format(time.RFC3339))
	}
	switch {
	case s.Cron != "":
		if _, err := parseCron(s.Cron); err != nil {
			return nil, &SpecError{Err: err}
		}
	case s.Every != 0:
		if spec.Every < time.Second || spec.Every%time.Second != 0 {
			return nil, invalid("--every %s: give whole seconds, at least 1s", spec.Every)
		}
	case s.After != "":
		s.Threshold = spec.Threshold
		if s.Threshold == 0 {
			s.Threshold = 1
		}
		if s.Threshold < 1 {
			return nil, invalid("--threshold %d: give at least 1", spec.Threshold)
		}
		if err := checkKnown(ctx, st, s.After); err != nil {
			return nil, err
		}
	}
	if spec.Threshold != 0 && s.After == "" {
		return nil, invalid("--threshold goes with --after: drop it, or give --after WORKFLOW")
	}
	// The params are checked as whimbrel start checks them, so that a
	// schedule every fire of which would fail is never set.
	params, err := spec.Definition.Bind(spec.Params)
	if err != nil {
		return nil, &SpecError{Err: err}
	}
	if len(params) > 0 {
		s.Params = params
	}
	s.Definition = spec.Definition.JSON()
	if _, err := definition.FromJSON(s.Definition); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	return s, nil
}

func checkName(name string) error {
	switch {
	case name == "":
		return invalid("a schedule needs a name")
	case len(name) > 200:
		return invalid("schedule name %.20q… is longer than 200 characters", name)
	case strings.ContainsAny(name, "@/ \t\n") || strings.Contains(name, "::"):
		return invalid("schedule name %q: use letters, digits, '-', '_' or '.', not '@', '/', '::' or spaces", name)
	}
	return nil
}

// registrations is what checkKnown needs of a store that keeps the Simple
// Lambda API's registered workflows beside it (simpleapi/inbox.Inbox).
type registrations interface {
	Registration(ctx context.Context, workflowName string) (*state.WorkflowLambda, error)
}

// checkKnown refuses an upstream workflow that nothing knows: one that
// never ran here and is not registered.
func checkKnown(ctx context.Context, st Store, name string) error {
	ws, err := st.Workflows(ctx, state.WorkflowQuery{Name: name, Limit: 1})
	if _, err = state.Skipped(err); err != nil { // a bad item is reported by the store
		return fmt.Errorf("--after %s: %w", name, err)
	}
	if len(ws) > 0 {
		return nil
	}
	if in, ok := st.(registrations); ok {
		if _, err := in.Registration(ctx, name); err == nil {
			return nil
		}
	}
	return invalid("--after %s: no workflow of that name has run here or is registered: give the name of one that has", name)
}

// clockOf is a time trigger's clock.
func clockOf(s *state.Schedule) (clock, error) {
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		return clock{}, fmt.Errorf("schedule %s: time zone %q: %w", s.Name, s.TimeZone, err)
	}
	c := clock{loc: loc, every: s.Every.Duration(), start: s.Start, end: s.End}
	if s.Cron != "" {
		if c.cron, err = parseCron(s.Cron); err != nil {
			return clock{}, fmt.Errorf("schedule %s: %w", s.Name, err)
		}
	} else if s.Every <= 0 {
		return clock{}, fmt.Errorf("schedule %s has no trigger", s.Name)
	}
	return c, nil
}

// nextFire is what the due index holds of a schedule: the next fire time
// after the cursor; for a token trigger its start, so that every tick
// looks at it; zero when paused or over.
func nextFire(s *state.Schedule) time.Time {
	if s.Paused {
		return time.Time{}
	}
	if s.After != "" {
		return s.Start
	}
	c, err := clockOf(s)
	if err != nil {
		return time.Time{}
	}
	return c.first(s.LastFire)
}

// update reads a schedule, changes it with fn, and writes it back
// conditionally, trying again when another writer moved first.
func update(ctx context.Context, st Store, name string, fn func(*state.Schedule) error) (*state.Schedule, error) {
	for attempt := 0; ; attempt++ {
		s, err := st.GetSchedule(ctx, name)
		if err != nil {
			return nil, err
		}
		prev := s.Version
		if err := fn(s); err != nil {
			return nil, err
		}
		err = st.PutSchedule(ctx, s, prev, "")
		if errors.Is(err, state.ErrConflict) && attempt < 10 {
			continue
		}
		return s, err
	}
}

// Pause stops a schedule firing.
func Pause(ctx context.Context, st Store, name string) error {
	_, err := update(ctx, st, name, func(s *state.Schedule) error {
		s.Paused = true
		s.NextFire = time.Time{}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pause schedule %s: %w", name, err)
	}
	return nil
}

// Resume makes a paused schedule fire again. The fire times it missed
// meanwhile are handled by its catch-up rule; a token trigger under
// CatchupNone does not count what completed while it was paused.
func Resume(ctx context.Context, st Store, name string, now time.Time) error {
	_, err := update(ctx, st, name, func(s *state.Schedule) error {
		if s.Paused && s.After != "" && s.Catchup == CatchupNone {
			s.AfterSince = state.Truncate(now)
			s.Unsettled = nil
		}
		s.Paused = false
		s.NextFire = nextFire(s)
		return nil
	})
	if err != nil {
		return fmt.Errorf("resume schedule %s: %w", name, err)
	}
	return nil
}

// Delete deletes a schedule and returns what it deleted. The runs it
// started are left alone.
func Delete(ctx context.Context, st Store, name string) (*state.Schedule, error) {
	for attempt := 0; ; attempt++ {
		s, err := st.GetSchedule(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("delete schedule %s: %w", name, err)
		}
		err = st.DeleteSchedule(ctx, name, s.Version)
		if errors.Is(err, state.ErrConflict) && attempt < 10 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete schedule %s: %w", name, err)
		}
		return s, nil
	}
}

// logRun puts a line at the head of the run log, keeping RunLogSize.
func logRun(s *state.Schedule, r state.ScheduleRun) {
	s.Runs = append([]state.ScheduleRun{r}, s.Runs...)
	if len(s.Runs) > RunLogSize {
		s.Runs = s.Runs[:RunLogSize]
	}
}
