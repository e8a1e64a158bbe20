package schedule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Report says what one tick did. Started counts the runs this tick created
// (a run another scheduler created first is not counted here).
type Report struct {
	Due     int // schedules the due index named
	Started int // runs started
	Skipped int // fire times skipped by a catch-up rule
	Counted int // upstream completions counted as tokens
	Failed  int // runs that failed to start (in the run log, tried again later)
	// Fired lists the runs this tick started (those Started counts).
	Fired []Fired
}

// Fired is one run a tick started: the schedule's name, the fire time
// it is for, and when it was started (the lag is the difference).
type Fired struct {
	Schedule string
	Fire     time.Time
	At       time.Time
}

// maxAttempts bounds how often, within one tick, one schedule's step is
// tried again after another scheduler moved first.
const maxAttempts = 200

// Tick fires every schedule that is due at now, once, and returns what it
// did. A schedule that fails is logged and does not stop the others; the
// errors are returned together.
func Tick(ctx context.Context, st Store, now time.Time, log hclog.Logger) (Report, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	var r Report
	names, err := st.DueSchedules(ctx, now)
	if err != nil {
		return r, fmt.Errorf("tick: %w", err)
	}
	r.Due = len(names)
	var errs []error
	for _, name := range names {
		if err := fire(ctx, st, name, now, &r); err != nil {
			var fe *FireError
			if errors.As(err, &fe) {
				r.Failed++
			}
			log.Error("firing a schedule failed", "schedule", name, "error", err)
			errs = append(errs, fmt.Errorf("schedule %s: %w", name, err))
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
	}
	return r, errors.Join(errs...)
}

// Run ticks every interval until ctx is done: what a long-running
// scheduler (whimbrel-monitor) does beside its sweeps. observe, when not
// nil, is given each tick's report.
func Run(ctx context.Context, st Store, interval time.Duration, log hclog.Logger, observe func(Report)) error {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r, err := Tick(ctx, st, time.Now(), log)
		if observe != nil {
			observe(r)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			log.Warn("tick failed", "error", err)
		}
		if r.Started+r.Skipped+r.Counted+r.Failed > 0 {
			log.Info("tick done", "due", r.Due, "started", r.Started, "skipped", r.Skipped, "counted", r.Counted, "failed", r.Failed)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func fire(ctx context.Context, st Store, name string, now time.Time, r *Report) error {
	// Each step moves the schedule on (a fire, a skip, a token) or ends
	// the loop; only steps another scheduler beat in a row are counted.
	started := map[int64]bool{} // fire times (Unix seconds) this tick started
	for conflicts := 0; conflicts < maxAttempts; {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, err := st.GetSchedule(ctx, name)
		if errors.Is(err, state.ErrNotFound) {
			return nil // deleted since the index was read
		}
		if err != nil {
			return err
		}
		if s.Paused {
			return nil
		}
		var done bool
		if s.After != "" {
			done, err = stepAfter(ctx, st, s, now, r, started)
		} else {
			done, err = stepClock(ctx, st, s, now, r, started)
		}
		switch {
		case errors.Is(err, state.ErrConflict):
			conflicts++ // another scheduler moved first: read again
		case err != nil:
			return err
		case done:
			return nil
		default:
			conflicts = 0
		}
	}
	return fmt.Errorf("gave up after %d attempts: other schedulers kept moving it", maxAttempts)
}

// stepClock does the next step of a time trigger: skip what the catch-up
// rule skips, or start the next due fire time and move the cursor past it.
// It reports done when nothing is due.
func stepClock(ctx context.Context, st Store, s *state.Schedule, now time.Time, r *Report, started map[int64]bool) (done bool, err error) {
	c, err := clockOf(s)
	if err != nil {
		return false, err
	}
	keep := s.MaxCatchup
	if s.Catchup != CatchupAll {
		keep = 1
	}
	// The due fire times, keeping the last keep+1 and counting the rest.
	var win []time.Time
	n := 0
	var firstDue time.Time
	for f := c.first(s.LastFire); !f.IsZero() && !f.After(now); f = c.next(f) {
		if n == 0 {
			firstDue = f
		}
		n++
		win = append(win, f)
		if len(win) > keep+1 {
			win = win[1:]
		}
	}
	if n == 0 {
		if next := c.first(s.LastFire); !next.Equal(s.NextFire) { // repair an index entry left stale
			prev := s.Version
			s.NextFire = next
			return true, st.PutSchedule(ctx, s, prev, "")
		}
		return true, nil
	}
	run := win
	if len(run) > keep {
		run = run[len(run)-keep:]
	}
	skipped := n - len(run)
	var late time.Duration // under CatchupNone, how late the latest due fire time was seen
	if s.Catchup == CatchupNone && now.Sub(run[0]) > Grace {
		skipped, run, late = n, nil, now.Sub(run[0])
	}
	prev := s.Version
	if skipped > 0 {
		// A scheduler that died after starting the first due fire time,
		// before moving the cursor, started a run the catch-up rule would
		// now skip: finish and record it rather than log it as skipped.
		if req, err := st.GetRequest(ctx, RequestID(s.Name, firstDue), s.WorkflowName); err == nil && req.WorkflowExecID != "" {
			run = []time.Time{firstDue}
			skipped = 0
		} else if err != nil && !errors.Is(err, state.ErrNotFound) {
			return false, err
		}
	}
	if skipped > 0 {
		last := win[len(win)-1] // none runs: the latest is skipped too
		if len(run) > 0 {
			last = win[len(win)-len(run)-1]
		}
		s.LastFire = last
		s.NextFire = c.next(last)
		note := fmt.Sprintf("skipped %d missed fire time(s) from %s to %s (catch-up %s",
			skipped, firstDue.Format(time.RFC3339), last.Format(time.RFC3339), s.Catchup)
		if s.Catchup == CatchupAll {
			note += fmt.Sprintf(", at most %d", s.MaxCatchup)
		}
		if late > 0 {
			note += fmt.Sprintf("; the latest was seen %s late, more than the %s grace: schedulers must tick at least every %s",
				late.Truncate(time.Second), Grace, Grace/2)
		}
		giveUp(s, last, "skipped by the catch-up rule")
		logRun(s, state.ScheduleRun{Fire: last, At: wallNow(), Note: note + ")"})
		if err := st.PutSchedule(ctx, s, prev, ""); err != nil {
			return false, err
		}
		r.Skipped += skipped
		return false, nil
	}
	f := run[0]
	if wait, handled, err := overlap(ctx, st, s, c.next, f, now, r); handled { // overlap.go
		return wait, err
	}
	id, created, wait, err := tryStart(ctx, st, s, f, now, started)
	if wait || err != nil {
		return wait, err
	}
	s.LastFire = f
	s.NextFire = c.next(f)
	logStarted(s, state.ScheduleRun{Fire: f, RequestID: RequestID(s.Name, f), WorkflowExecID: id, At: wallNow()})
	err = st.PutSchedule(ctx, s, prev, "")
	if errors.Is(err, state.ErrConflict) {
		// Another scheduler moved first. If it moved the cursor past f
		// with a catch-up skip (it looked for f's run before this one
		// started it), the run stands: say so in the run log.
		var passed bool
		if passed, err = logPassedRun(ctx, st, s.Name, f, id, now); err == nil && !passed {
			err = state.ErrConflict // read again: f is still to do
		}
	}
	if err != nil {
		return false, err
	}
	if created {
		r.Started++
		r.Fired = append(r.Fired, Fired{Schedule: s.Name, Fire: f, At: now})
	}
	return false, nil
}

// passedNote marks a run logged by logPassedRun.
const passedNote = "started while another scheduler's catch-up skipped it"

// skippedOver reports whether the run log shows that a catch-up skip moved
// the cursor over f. Every other line records one move of the cursor, to
// its Fire, so the line with the least Fire at or after f is the move past
// f; it tells only if the log still reaches back before f.
func skippedOver(runs []state.ScheduleRun, f time.Time) bool {
	var mover *state.ScheduleRun
	reaches := len(runs) < RunLogSize
	for i := range runs {
		r := &runs[i]
		switch {
		case strings.HasPrefix(r.Note, setAgainNote):
			// not a move of the cursor
		case r.Note == passedNote:
			if r.Fire.Equal(f) {
				return false // logged already
			}
		case r.Failed():
			// not a move of the cursor
		case r.Fire.Before(f):
			reaches = true
		case mover == nil || r.Fire.Before(mover.Fire):
			mover = r
		}
	}
	return reaches && mover != nil && mover.RequestID == ""
}

// logPassedRun records in the run log the run of fire time f, which this
// scheduler started, when another scheduler's catch-up moved the cursor
// past f meanwhile. It reports passed = false when the cursor is still
// before f.
func logPassedRun(ctx context.Context, st Store, name string, f time.Time, id string, now time.Time) (passed bool, err error) {
	req := RequestID(name, f)
	for range maxAttempts {
		s, err := st.GetSchedule(ctx, name)
		if errors.Is(err, state.ErrNotFound) {
			return true, nil // deleted meanwhile
		}
		if err != nil {
			return false, err
		}
		if s.LastFire.Before(f) {
			return false, nil
		}
		if !skippedOver(s.Runs, f) {
			return true, nil // f's run is logged, or the log no longer goes back to it
		}
		prev := s.Version
		logStarted(s, state.ScheduleRun{Fire: f, RequestID: req, WorkflowExecID: id, At: wallNow(), Note: passedNote})
		err = st.PutSchedule(ctx, s, prev, "")
		if !errors.Is(err, state.ErrConflict) {
			return true, err
		}
	}
	return true, fmt.Errorf("log the run of %s: other schedulers kept moving the schedule", req)
}

// start starts the run of fire time f. The request ID makes it exactly
// once: a start repeated by anyone answers with the first execution.
func start(ctx context.Context, st Store, s *state.Schedule, f time.Time) (id string, created bool, err error) {
	d, err := definition.FromJSON(s.Definition)
	if err != nil {
		return "", false, err
	}
	d.Defaults.Env = maps.Clone(d.Defaults.Env)
	if d.Defaults.Env == nil {
		d.Defaults.Env = map[string]string{}
	}
	t := f.UTC().Format(time.RFC3339)
	d.Defaults.Env[EnvSchedule] = s.Name
	d.Defaults.Env[EnvFireTime] = t
	return workflow.Start(ctx, st, d, workflow.StartOptions{
		RequestID: RequestID(s.Name, f), Source: fmt.Sprintf("schedule %s at %s", s.Name, t), Params: RunParams(s, d)})
}

// RunParams are the params a schedule's runs are started with: its params
// that the definition declares. A schedule item may also carry its values
// in the definition's defaults.env as WHIMBREL_PARAM_<NAME>, where a
// declared param's default would hide them: given here, the declared ones
// reach the run's params and templates, and the undeclared ones still
// reach the activities through defaults.env.
func RunParams(s *state.Schedule, d *definition.Workflow) map[string]string {
	out := map[string]string{}
	for k, v := range s.Params {
		if _, ok := d.Params[k]; ok {
			out[k] = v
		}
	}
	return out
}

// ShownParams are the params a schedule's runs see, as its views show
// them: the declared ones bound as a fire binds them (with the defaults
// of those it does not give), and the undeclared ones it keeps, which
// reach the runs' environment. A definition that does not parse or bind
// shows the schedule's params as they are (its fires fail, and say why).
func ShownParams(s *state.Schedule) map[string]string {
	d, err := definition.FromJSON(s.Definition)
	if err != nil {
		return s.Params
	}
	out, err := d.Bind(RunParams(s, d))
	if err != nil {
		return s.Params
	}
	for k, v := range s.Params {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stepAfter does the next step of a token trigger: count the upstream
// executions that completed, one conditional write each (with the token
// item that makes it once), then start the runs the tokens made due.
func stepAfter(ctx context.Context, st Store, s *state.Schedule, now time.Time, r *Report, started map[int64]bool) (done bool, err error) {
	if len(s.Pending) > 0 {
		f := s.Pending[0]
		id, created, wait, err := tryStart(ctx, st, s, f, now, started)
		if err != nil {
			return false, err
		}
		if !wait { // a run waiting for its retry does not hold back the counting below
			prev := s.Version
			s.Pending = slices.Clone(s.Pending[1:])
			s.Fired++
			s.LastFire = f
			logStarted(s, state.ScheduleRun{Fire: f, RequestID: RequestID(s.Name, f), WorkflowExecID: id, At: wallNow(),
				Note: fmt.Sprintf("run %d: %d completions of %s", s.Fired, s.Threshold, s.After)})
			if err := st.PutSchedule(ctx, s, prev, ""); err != nil {
				return false, err
			}
			if created {
				r.Started++
				r.Fired = append(r.Fired, Fired{Schedule: s.Name, Fire: f, At: now})
			}
			return false, nil
		}
	}
	since := lookFrom(s, s.AfterSince)
	ws, err := st.Workflows(ctx, state.WorkflowQuery{Name: s.After, Since: since})
	if _, err = state.Skipped(err); err != nil { // a bad item is reported by the store, never counted
		return false, err
	}
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		seen[w.WorkflowExecID] = true
	}
	// The unsettled executions the look no longer reaches: one read each.
	for _, id := range s.Unsettled {
		if seen[id] {
			continue
		}
		w, err := st.GetWorkflow(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			continue // deleted or expired: forgotten below
		}
		if err != nil {
			return false, err
		}
		seen[id] = true
		ws = append(ws, w)
	}
	sort.Slice(ws, func(i, j int) bool {
		if !ws[i].StartTime.Equal(ws[j].StartTime) {
			return ws[i].StartTime.Before(ws[j].StartTime)
		}
		return ws[i].WorkflowExecID < ws[j].WorkflowExecID
	})
	inRange := func(w *state.WorkflowExec) bool {
		return !w.StartTime.Before(s.Start) && (s.End.IsZero() || !w.StartTime.After(s.End))
	}
	counted := false
	var known []string // counted before, though s.Counted forgot it
	for _, w := range ws {
		id := w.WorkflowExecID
		if w.State != state.WorkflowCompleted || !inRange(w) || slices.Contains(s.Counted, id) {
			continue
		}
		prev := s.Version
		next := *s
		next.Tokens++
		next.Counted = append(slices.Clone(s.Counted), id)
		if len(next.Counted) > maxCounted { // a backlog: the item stays small, the token items guard the rest
			next.Counted = next.Counted[len(next.Counted)-maxCounted:]
		}
		next.Unsettled = slices.DeleteFunc(slices.Clone(s.Unsettled), func(u string) bool { return u == id })
		if next.Tokens%s.Threshold == 0 {
			next.Pending = append(slices.Clone(s.Pending), tokenFireTime(s, w.EndTime, now))
		}
		err := st.PutSchedule(ctx, &next, prev, id)
		if errors.Is(err, state.ErrExists) {
			known = append(known, id) // counted before, by this or another scheduler
			continue
		}
		if err != nil {
			return false, err
		}
		r.Counted++
		s, counted = &next, true
	}
	if counted {
		return false, nil // read again: runs may be due
	}
	// Move the watermark to the latest start seen, and remember what the
	// next look needs: the executions it may see again that were counted,
	// and the unsettled ones it no longer reaches. So a tick costs a query
	// of the last AfterLag of starts and a read per unsettled execution,
	// whatever ran before.
	mark := s.AfterSince
	for _, w := range ws {
		if w.StartTime.After(mark) {
			mark = w.StartTime
		}
	}
	from := lookFrom(s, mark)
	var keep, unsettled []string
	for _, w := range ws {
		id := w.WorkflowExecID
		switch {
		case !inRange(w):
		case !w.State.Terminal():
			if w.StartTime.Before(from) {
				unsettled = append(unsettled, id)
			}
		case w.State == state.WorkflowCompleted && !w.StartTime.Before(from) &&
			(slices.Contains(s.Counted, id) || slices.Contains(known, id)):
			keep = append(keep, id)
		}
	}
	if len(keep) > maxCounted {
		keep = keep[len(keep)-maxCounted:] // the token items still guard the rest
	}
	if mark.Equal(s.AfterSince) && slices.Equal(keep, s.Counted) && slices.Equal(unsettled, s.Unsettled) {
		return true, nil
	}
	prev := s.Version
	s.AfterSince, s.Counted, s.Unsettled = mark, keep, unsettled
	return true, st.PutSchedule(ctx, s, prev, "")
}

// lookFrom is where a token trigger with watermark mark looks for upstream
// executions: AfterLag before it, so that one written late to the index
// is still seen, and not before the schedule's start.
func lookFrom(s *state.Schedule, mark time.Time) time.Time {
	since := mark.Add(-AfterLag)
	if since.Before(s.Start) {
		since = s.Start
	}
	return since
}

// tokenFireTime is the fire time of a token run: the upstream completion
// that made it due, to the second, and after every earlier fire time so
// that each run's request ID differs.
func tokenFireTime(s *state.Schedule, end, now time.Time) time.Time {
	t := end
	if t.IsZero() {
		t = now
	}
	t = t.UTC().Truncate(time.Second)
	last := s.LastFire
	if n := len(s.Pending); n > 0 {
		last = s.Pending[n-1]
	}
	if !t.After(last) {
		t = last.Add(time.Second).Truncate(time.Second)
	}
	return t
}
