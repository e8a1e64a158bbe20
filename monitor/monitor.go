// Package monitor is the contract's heartbeat monitor and the janitor of a
// serverless system: each sweep times out RUNNING activities whose
// heartbeats stopped, fails launches that never started, cancels what
// settled workflows left pending, finishes the advances that crashed
// wrappers left half-done (readying activities whose upstreams all
// completed), settles workflows whose activities are all terminal, and
// fails workflows whose start never finished. Every action is a conditional write, so any number of monitors
// may sweep at once; each action happens once. A sweep reads the live
// activities and workflows through the state indexes: its cost grows with
// what is running, never with history, but for a bounded adoption scan
// (Adopter) that puts the items other clients wrote without the indexes'
// attributes under them.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Defaults of Config.
const (
	DefaultInterval = 30 * time.Second
	// DefaultSkew allows for clocks that disagree between the wrapper that
	// wrote a heartbeat and the monitor that judges it.
	DefaultSkew = 5 * time.Second
	// DefaultAdoptPages is how many pages of each table a sweep's
	// adoption scan reads (see Adopter).
	DefaultAdoptPages = 4
)

// Config configures a Monitor.
type Config struct {
	Interval time.Duration // between sweeps (default DefaultInterval)
	// Skew is the clock-skew allowance added to every heartbeat timeout (0:
	// none; whimbrel-monitor's default is DefaultSkew).
	Skew time.Duration
	// QueuedTimeout applies to activities whose definition sets none, and
	// to workflows whose start never finished (default
	// definition.DefaultQueuedTimeout).
	QueuedTimeout time.Duration
	Logger        hclog.Logger
	// Now is the clock (default clock.Now); tests move it.
	Now func() time.Time
	// Workflow, when set, limits the sweeps to that execution (whimbrel
	// run's own monitor).
	Workflow string
	// AdvanceGrace leaves the advance after an activity that ended less
	// than this ago to whoever is carrying it out, its wrapper most
	// likely, instead of repeating it alongside (0: repeat at once).
	// whimbrel run's monitor, sweeping every few seconds, would otherwise
	// repeat a large fan-out's advance, thousands of writes, while it is
	// still under way.
	AdvanceGrace time.Duration
	// SweepCost, when set, makes Run wait at least this many times as
	// long as the last sweep took between the starts of two sweeps.
	// whimbrel run's monitor reads every activity of its workflow in a
	// sweep: for one of thousands, every 2 s would keep a core busy.
	SweepCost int
	// AdoptPages bounds the adoption scan of a store that has one
	// (Adopter): pages of each table a sweep reads (0:
	// DefaultAdoptPages; negative: no adoption). A monitor limited to one
	// Workflow adopts nothing.
	AdoptPages int
	// Observer, when set, is told what each sweep saw and did.
	Observer Observer
}

// Report counts what one sweep did.
type Report struct {
	TimedOut         int // RUNNING → TIMED_OUT
	FailedLaunches   int // QUEUED or PREPARING → FAILED
	Cancelled        int // pending activities of settled workflows → CANCELLED
	CancelledRunning int // running activities of cancelled workflows → CANCELLED_RUNNING
	Repaired         int // advances finished, and activities readied, after a crash
	Readied          int // dependents readied by the advances of this sweep
	CancelledDown    int // dependents cancelled by the advances of this sweep
	Settled          int // workflows settled
	FailedStarts     int // workflows whose start never finished → FAILED
	Adopted          int // items another client wrote put under the store's index shards
	// Undecodable counts the items the sweep skipped because they could
	// not be decoded; the store reports each with its key.
	Undecodable int
}

// Store is what a monitor needs of a store: the activities in each state
// and the workflows running or still starting to judge, and what
// advancing and settling after its verdicts needs.
type Store interface {
	workflow.Advancer
	ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error)
	Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error)
}

// Adopter is a store whose listings find only the items carrying
// attributes another client may leave out (DynamoDB's index shards):
// Adopt finds such items, at most pages pages of each table a call, going
// on where the last call stopped, and gives them the attributes. It
// returns how many it changed.
type Adopter interface {
	Adopt(ctx context.Context, pages int) (int, error)
}

// Monitor sweeps.
type Monitor struct {
	st  Store
	cfg Config
	log hclog.Logger

	scope *workflow.Family // cfg.Workflow and its child workflows
	maps  mapsSeen         // the for_each maps' accounts at the last sweep
	due   retryDue         // the parked retries' not_before (retrywait.go)
}

// New returns a Monitor.
func New(st Store, cfg Config) *Monitor {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	cfg.Skew = max(cfg.Skew, 0)
	if cfg.QueuedTimeout <= 0 {
		cfg.QueuedTimeout = definition.DefaultQueuedTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	if cfg.AdoptPages == 0 {
		cfg.AdoptPages = DefaultAdoptPages
	}
	return &Monitor{st: st, cfg: cfg, log: cfg.Logger, scope: workflow.NewFamily(cfg.Workflow)}
}

// Run sweeps every interval (or SweepCost times a sweep's duration, if
// longer) until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	for {
		began := time.Now()
		if _, err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("sweep failed; trying again at the next one", "error", err)
		}
		took := time.Since(began)
		t := time.NewTimer(max(m.cfg.Interval, time.Duration(m.cfg.SweepCost)*took) - took)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// sweep holds what one sweep has read.
type sweep struct {
	*Monitor
	now       time.Time
	workflows map[string]*state.WorkflowExec
	defs      map[string]*definition.Workflow
	report    Report
	reexpired map[string]bool // workflows whose items this sweep marked to expire again
	seen      Seen
	// live holds the activities this sweep listed queued, preparing or
	// running: their pool slots are not looked at (freeEnded).
	live map[state.ActivityKey]bool
}

// Sweep makes one pass. Errors on single items are logged and the sweep
// goes on; the error returned is the first that stopped a whole step.
func (m *Monitor) Sweep(ctx context.Context) (Report, error) {
	began := time.Now()
	s := &sweep{Monitor: m, now: m.cfg.Now(), workflows: map[string]*state.WorkflowExec{},
		defs: map[string]*definition.Workflow{}, reexpired: map[string]bool{}, seen: newSeen(), live: map[state.ActivityKey]bool{}}
	var errs []error
	var steps []func(context.Context) error
	a, adopting := m.st.(Adopter)
	adopting = adopting && m.cfg.AdoptPages > 0 && m.cfg.Workflow == ""
	if adopting {
		// First, so that what it adopts is judged in this sweep.
		steps = append(steps, func(ctx context.Context) error {
			n, err := a.Adopt(ctx, m.cfg.AdoptPages)
			s.report.Adopted += n
			return err
		})
	}
	for _, st := range []state.ActivityState{state.Running, state.Queued, state.Preparing, state.Ready, state.Requested} {
		steps = append(steps, func(ctx context.Context) error { return s.activities(ctx, st) })
	}
	steps = append(steps, s.parked, s.waitingRetries, s.repair, s.staleStarts)
	for i, step := range steps {
		err := step(ctx)
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if adopting && i == 0 {
			// A scan page that timed out says little about the queries
			// that judge what runs: they go on (the first of them
			// finds out whether the store is down).
			continue
		}
		if errors.Is(err, state.ErrUnavailable) {
			// The store cannot be used (it does not answer, a table is
			// missing): every other step would wait and fail the same.
			break
		}
	}
	err := errors.Join(errs...)
	if m.cfg.Observer != nil {
		s.seen.Report, s.seen.Took, s.seen.Err = s.report, time.Since(began), err
		m.cfg.Observer.Swept(s.seen)
	}
	return s.report, err
}

// activities judges every activity in one live state.
func (s *sweep) activities(ctx context.Context, st state.ActivityState) error {
	refs, err := s.st.ActivitiesInState(ctx, state.ActivityQuery{State: st})
	if err = s.skipped(err); err != nil {
		return fmt.Errorf("list %s activities: %w", st, err)
	}
	s.seen.listedActivities(st, refs, s.cfg.Workflow, s.now)
	if st == state.Running || st == state.Queued || st == state.Preparing {
		for _, ref := range refs {
			s.live[ref.ActivityKey] = true
		}
	}
	for _, ref := range refs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !s.scope.Has(ctx, s.st, ref.WorkflowExecID) {
			continue
		}
		err := s.judge(ctx, ref.ActivityKey, st)
		switch {
		case errors.Is(err, state.ErrUnavailable):
			return err // the others would wait for the store the same
		case errors.Is(err, state.ErrInvalidItem):
			s.report.Undecodable++ // the activity or its workflow; reported by the store
		case err != nil:
			s.log.Warn("could not judge an activity", "activity_exec_id", ref.ActivityExecID, "error", err)
		}
	}
	return nil
}

func (s *sweep) judge(ctx context.Context, k state.ActivityKey, listed state.ActivityState) error {
	wf, err := s.workflow(ctx, k.WorkflowExecID)
	if err != nil {
		return err
	}
	if (listed == state.Requested || listed == state.Ready) && !wf.State.Terminal() {
		return nil // pending in a live workflow: nothing to judge
	}
	// The index is eventually consistent: judge the item itself.
	a, err := s.st.GetActivity(ctx, k)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if a.State.Terminal() {
		return nil
	}
	if workflow.SkipHeld(a) && wf.State == state.WorkflowRunning {
		// A skip its decider left half-way: finish it.
		return workflow.FinishSkip(ctx, s.st, a, s.log.Named("advance"))
	}
	switch {
	case wf.State.Terminal() && a.State != state.Running:
		n := s.report.Cancelled
		if err := s.cancel(ctx, a, state.Cancelled, fmt.Sprintf("workflow %s is %s", wf.WorkflowExecID, wf.State), &s.report.Cancelled); err != nil {
			return err
		}
		if s.report.Cancelled > n && !wf.Expires.IsZero() && a.Expires.IsZero() && !s.reexpired[wf.WorkflowExecID] {
			s.reexpired[wf.WorkflowExecID] = true
			// Written after the workflow's items were marked to expire
			// (a retry created while the workflow was being cancelled):
			// mark them again, so that this one is deleted with them.
			if err := s.st.Expire(ctx, wf.WorkflowExecID, wf.Expires); err != nil {
				s.log.Warn("marking a late item to expire failed; it is kept", "activity_exec_id", a.ActivityExecID, "error", err)
			}
		}
		return nil
	case wf.State == state.WorkflowCancelled && a.State == state.Running:
		why := fmt.Sprintf("workflow %s was cancelled", wf.WorkflowExecID)
		if err := s.cancel(ctx, a, state.CancelledRunning, why, &s.report.CancelledRunning); err != nil {
			return err
		}
		workflow.CancelChild(ctx, s.st, a, why, s.log.Named("child"))
		return nil
	case a.State == state.Running:
		if childID, ok := state.ChildOf(a); ok {
			return s.child(ctx, wf, a, childID)
		}
		return s.heartbeat(ctx, a)
	case a.State == state.Queued || a.State == state.Preparing:
		return s.launch(ctx, a)
	}
	return nil
}

// heartbeat times out a RUNNING activity whose last heartbeat is older
// than its own timeout plus the skew. Whimbrel's claim writes the first
// heartbeat; an item claimed by a client that does not (heartbeat_time_epoch
// still negative) is judged from its start, or failing that its claim. The
// write is conditional on the heartbeat it saw, so a beat that lands in
// between wins.
func (s *sweep) heartbeat(ctx context.Context, a *state.ActivityExec) error {
	if !a.HeartbeatEnabled {
		return nil
	}
	last, since := a.HeartbeatTime, "last heartbeat"
	if last.IsZero() {
		last, since = a.StartTime, "start, with no heartbeat since"
	}
	if last.IsZero() {
		last, since = a.StateTime, "claim"
	}
	timeout := a.HeartbeatTimeout
	if timeout <= 0 {
		timeout = state.DefaultHeartbeatTimeout
	}
	age := s.now.Sub(last)
	s.seen.beat(a.WorkflowExecID, age)
	if age <= timeout+s.cfg.Skew {
		return nil
	}
	seen := a.HeartbeatTime
	reason := fmt.Sprintf("no heartbeat for %s (%s at %s; timeout %s)", age.Round(time.Second), since, last.Format(time.RFC3339), timeout)
	done, err := s.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.TimedOut, HeartbeatSeen: &seen,
		Owner: a.Owner, At: s.now, Reason: reason,
	})
	if errors.Is(err, state.ErrConflict) {
		return nil // a heartbeat landed, or someone else acted first
	}
	if err != nil {
		return err
	}
	s.report.TimedOut++
	s.log.Info("timed out", "activity_exec_id", a.ActivityExecID, "why", reason)
	return s.advance(ctx, done)
}

// launch fails an activity that was launched (QUEUED) or being prepared
// longer ago than its queued timeout: its wrapper never started.
func (s *sweep) launch(ctx context.Context, a *state.ActivityExec) error {
	timeout := s.cfg.QueuedTimeout
	if def := s.definition(ctx, a.WorkflowExecID); def != nil && def.Activities[a.ActivityName] != nil {
		if own := time.Duration(def.Effective(a.ActivityName).QueuedTimeout); own > 0 {
			timeout = own
		}
	}
	age := s.now.Sub(a.StateTime)
	if a.StateTime.IsZero() || age <= timeout {
		return nil
	}
	reason := fmt.Sprintf("%s for %s, longer than the queued timeout %s: its wrapper never started", a.State, age.Round(time.Second), timeout)
	if a.LaunchedAs != "" {
		reason += " (launched as " + a.LaunchedAs + ")"
	}
	done, err := s.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{a.State}, To: state.Failed, At: s.now, Reason: reason,
	})
	if errors.Is(err, state.ErrConflict) {
		return nil // it started after all
	}
	if err != nil {
		return err
	}
	s.report.FailedLaunches++
	s.log.Info("failed a launch that never started", "activity_exec_id", a.ActivityExecID, "why", reason)
	return s.advance(ctx, done)
}

// cancel moves an activity of a settled or cancelled workflow.
func (s *sweep) cancel(ctx context.Context, a *state.ActivityExec, to state.ActivityState, reason string, count *int) error {
	_, err := s.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{a.State}, To: to, At: s.now, Reason: reason,
	})
	if errors.Is(err, state.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	*count++
	s.log.Info("cancelled", "activity_exec_id", a.ActivityExecID, "state", to, "why", reason)
	return nil
}

func (s *sweep) advance(ctx context.Context, a *state.ActivityExec) error {
	res, err := workflow.Advance(ctx, s.st, a, s.log.Named("advance"))
	s.report.Readied += len(res.Readied)
	s.report.CancelledDown += len(res.Cancelled)
	if res.Settled != "" {
		s.report.Settled++
		s.workflows[a.WorkflowExecID] = nil // read it again if needed
	}
	return err
}

// staleStarts fails workflows whose start never finished: still REQUESTED
// long after they were created, because their creator died and nobody
// repeated the start.
func (s *sweep) staleStarts(ctx context.Context) error {
	wfs, err := s.st.Workflows(ctx, state.WorkflowQuery{State: state.WorkflowRequested})
	if err = s.skipped(err); err != nil {
		return fmt.Errorf("list requested workflows: %w", err)
	}
	s.seen.listedWorkflows(state.WorkflowRequested, wfs, s.cfg.Workflow)
	wfs = s.startWaitingRuns(ctx, wfs) // runs.go
	for _, wf := range wfs {
		if s.cfg.Workflow != "" && wf.WorkflowExecID != s.cfg.Workflow {
			continue
		}
		age := s.now.Sub(wf.StartTime)
		if age <= s.cfg.QueuedTimeout || s.definition(ctx, wf.WorkflowExecID) == nil {
			continue // young, or another client's, which may keep it REQUESTED
		}
		reason := fmt.Sprintf("its start did not finish within %s (created %s ago)", s.cfg.QueuedTimeout, age.Round(time.Second))
		failed, err := s.st.UpdateWorkflow(ctx, wf.WorkflowExecID, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowFailed, At: s.now, Reason: reason,
		})
		switch {
		case errors.Is(err, state.ErrConflict):
		case err != nil:
			s.log.Warn("could not fail a stale start", "workflow_exec_id", wf.WorkflowExecID, "error", err)
		default:
			s.report.FailedStarts++
			workflow.NotifyEnding(ctx, s.st, failed, s.log.Named("notify"))
			s.log.Info("failed a workflow whose start never finished", "workflow_exec_id", wf.WorkflowExecID, "why", reason)
		}
	}
	return nil
}
