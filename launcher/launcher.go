// Package launcher is the Activity Launcher of seed 000: it finds READY
// activities through the state index, claims each with one conditional
// write to QUEUED, starts it through a Backend (a local process, a Docker
// container, an ECS task) and records what it started. Activities that wait
// on nothing are readied by workflow.Start (or, after a crash, by the
// monitor), so REQUESTED ones need not be searched.
// Any number of launchers may run at once: the conditional write decides
// which one launches an activity, so none is launched twice.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Backend starts activities of one launch type.
type Backend interface {
	// Launch starts the activity's wrapper and returns what it started: a
	// pid, a container ID, a task ARN.
	Launch(ctx context.Context, j Job) (string, error)
}

// Job is what a backend needs to start one activity.
type Job struct {
	Key          state.ActivityKey
	WorkflowName string
	ActivityName string
	// Attempt is the item's attempt as read before the launch: n for a
	// retry's item, 0 for a first attempt (its claim writes 1). With the
	// key, it names this launch.
	Attempt int
	// Token is the launcher's claim token, the item's owner until the
	// wrapper claims it.
	Token   string
	Command []string
	// Env is the environment of the wrapper: its identity, the store, the
	// activity's settings and the definition's env.
	Env      map[string]string
	Settings workflow.Settings // with the defaults filled in
}

// Defaults of Config.
const (
	DefaultInterval = time.Second
	// DefaultWorkers is how many launches one launcher carries out at once:
	// enough that a slow or throttled backend call never holds up the rest,
	// few enough not to flood the backend's API.
	DefaultWorkers = 16
	// DefaultCallTimeout bounds one backend call. A call cut off by it may
	// still have started the activity: it is tried again under the same
	// launch token, which the backends deduplicate.
	DefaultCallTimeout = 30 * time.Second
	// DefaultRetryFor is how long a launch that fails for a reason that may
	// pass (throttling, 5xx, an unreachable endpoint, ECS short of
	// capacity) is retried before the activity is failed; a definition's
	// launch.retry_for replaces it.
	DefaultRetryFor = 3 * time.Minute
	// DefaultRetryInterval is the first wait between two attempts of a
	// launch; the waits double up to maxRetryInterval.
	DefaultRetryInterval = time.Second
	maxRetryInterval     = 30 * time.Second
	// recordTimeout bounds the recording of a launch's outcome, retries
	// included. It runs on a fresh context, so an expired launch deadline
	// or a shutdown cannot stop the record from being written.
	recordTimeout = 30 * time.Second
)

// patient is implemented by backends whose calls may need longer than
// Config.CallTimeout, such as docker run pulling an image.
type patient interface {
	// CallTimeout is the least deadline one call needs.
	CallTimeout() time.Duration
}

// TemporaryError is a launch error that may pass: the launcher tries the
// launch again, with backoff, until the activity's launch deadline.
// Backends return it for throttling, server errors, unreachable endpoints
// and the like; any other error fails the activity at once.
type TemporaryError struct{ Err error }

func (e *TemporaryError) Error() string { return e.Err.Error() }
func (e *TemporaryError) Unwrap() error { return e.Err }

// Config configures a Launcher.
type Config struct {
	// Backends by launch type (workflow.LaunchLocal, …). Activities of a
	// type with no backend are left to other launchers.
	Backends map[string]Backend
	Interval time.Duration // between polls (default DefaultInterval)
	// MaxRunning caps the activities this launcher has started, or is
	// starting, that have not ended (0: no cap).
	MaxRunning int
	// Workers is how many launches run at once (default DefaultWorkers).
	Workers int
	// CallTimeout bounds one backend call (default DefaultCallTimeout).
	CallTimeout time.Duration
	// RetryFor is how long temporary launch failures are retried (default
	// DefaultRetryFor; a definition's launch.retry_for wins).
	RetryFor time.Duration
	// RetryInterval is the first wait between attempts (default
	// DefaultRetryInterval).
	RetryInterval time.Duration
	// Nudge, when set, wakes the poll early.
	Nudge <-chan struct{}
	// StoreEnv is passed to every wrapper so it reaches the same store
	// (WHIMBREL_STORE, WHIMBREL_TABLE_PREFIX, …).
	StoreEnv map[string]string
	// Workflow, when set, limits the launcher to that execution's
	// activities (whimbrel run's own launcher).
	Workflow string
	Logger   hclog.Logger
}

// Store is what a launcher needs of a store: the READY activities to
// claim, and what advancing past a launch that failed needs.
type Store interface {
	workflow.Advancer
	ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error)
}

// Launcher claims and launches activities.
type Launcher struct {
	st  Store
	cfg Config
	log hclog.Logger

	slots chan struct{} // one per worker
	wg    sync.WaitGroup
	// freed wakes Run when a local child exits under MaxRunning: its slot
	// is free at once, not at the next poll.
	freed chan struct{}

	mu      sync.Mutex
	defs    map[string]*workflow.Definition // by workflow_exec_id; definitions never change
	running map[state.ActivityKey]bool      // launched by us, not yet seen to end
	busy    map[state.ActivityKey]bool      // being tried by a worker
	// exited holds, under MaxRunning, the busy activities whose process
	// ended before their launch was recorded: they take no slot.
	exited map[state.ActivityKey]bool
	// waiting holds the not_before of retries seen waiting out their
	// delay: it never changes, so they are not read again until then.
	waiting map[state.ActivityKey]time.Time

	// undecodable counts the items passes skipped because they could not
	// be decoded (the store reports each one).
	undecodable atomic.Int64
}

// Undecodable is how many items the passes so far skipped because they
// could not be decoded: each is reported by the store, with its key.
func (l *Launcher) Undecodable() int64 { return l.undecodable.Load() }

// New returns a Launcher.
func New(st Store, cfg Config) *Launcher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.RetryFor <= 0 {
		cfg.RetryFor = DefaultRetryFor
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Launcher{st: st, cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.Workers), freed: make(chan struct{}, 1),
		defs: map[string]*workflow.Definition{}, running: map[state.ActivityKey]bool{}, busy: map[state.ActivityKey]bool{},
		waiting: map[state.ActivityKey]time.Time{}, exited: map[state.ActivityKey]bool{}}
}

// Run polls until ctx ends, then returns once the launches in flight have
// been recorded. It returns nil on a clean stop. A pass does not wait for
// its launches: the next one starts on time and leaves alone the
// activities still being launched.
func (l *Launcher) Run(ctx context.Context) error {
	defer l.waitGuards()
	defer l.wg.Wait()
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := l.pass(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("poll failed; trying again at the next one", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.cfg.Nudge:
		case <-l.freed:
		}
	}
}

// Once makes one pass: it claims and launches what it finds, waits for
// those launches to be recorded, and returns how many it launched (failed
// launches are not counted). When ctx ends it stops claiming, but a launch
// already claimed is carried out and recorded, so nothing is left QUEUED
// without a launch or a reason.
//
// It reads READY activities only: workflow.Start readies the activities
// that wait on nothing, and advances ready the rest, so activities still
// waiting never crowd the launchable ones out of a pass.
func (l *Launcher) Once(ctx context.Context) (int, error) {
	p, err := l.pass(ctx)
	if p == nil {
		return 0, err
	}
	p.wg.Wait()
	l.waitGuards()
	if err == nil {
		err = p.storeErr()
	}
	return int(p.launched.Load()), err
}

// wake starts a pass at once: a slot is free.
func (l *Launcher) wake() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// guardWaiter is a backend that guards the wrappers it started (Local):
// WaitGuards waits for the guards still stopping the commands of wrappers
// that died.
type guardWaiter interface{ WaitGuards() }

// waitGuards lets the backends' guards finish what they started, so that
// a launcher that returns leaves no killed wrapper's command half stopped.
func (l *Launcher) waitGuards() {
	for _, b := range l.cfg.Backends {
		if g, ok := b.(guardWaiter); ok {
			g.WaitGuards()
		}
	}
}

// pass reads the READY activities and hands each to a worker, waiting for
// a free one when all are busy. It returns without waiting for the
// launches.
func (l *Launcher) pass(ctx context.Context) (*pass, error) {
	if err := l.forgetEnded(ctx); err != nil {
		return nil, err
	}
	refs, err := l.st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: scan})
	// One item that does not decode never stops the launches of the
	// others: the store reported it, and the pass goes on without it.
	skipped, err := state.Skipped(err)
	if err != nil {
		return nil, err
	}
	l.undecodable.Add(int64(len(skipped)))
	p := &pass{workflows: map[string]*passWorkflow{}}
	now := clock.Now()
	l.mu.Lock()
	for k, t := range l.waiting {
		if !now.Before(t) {
			delete(l.waiting, k)
		}
	}
	l.mu.Unlock()
	for _, ref := range fair(refs, l.cfg.Workflow) {
		k := ref.ActivityKey
		if ctx.Err() != nil || p.storeErr() != nil {
			break
		}
		l.mu.Lock()
		if _, wait := l.waiting[k]; l.busy[k] || wait {
			l.mu.Unlock()
			continue
		}
		if l.cfg.MaxRunning > 0 && len(l.running)+len(l.busy) >= l.cfg.MaxRunning {
			l.mu.Unlock()
			break
		}
		l.busy[k] = true
		l.mu.Unlock()
		select {
		case l.slots <- struct{}{}:
		case <-ctx.Done():
			l.mu.Lock()
			delete(l.busy, k)
			l.mu.Unlock()
			return p, nil
		}
		p.wg.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer p.wg.Done()
			defer func() { <-l.slots }()
			launched, err := l.try(ctx, p, k)
			l.mu.Lock()
			delete(l.busy, k)
			// Counted only under a cap, and not if its process has
			// exited already (while the launch was being recorded).
			exited := l.exited[k]
			delete(l.exited, k)
			if launched && l.cfg.MaxRunning > 0 && !exited {
				l.running[k] = true
			}
			l.mu.Unlock()
			if exited {
				l.wake()
			}
			switch {
			case errors.Is(err, state.ErrUnavailable):
				// The others would wait for the store the same: the
				// pass hands out no more.
				p.unavailable(err)
				l.log.Warn("launch attempt failed: the store did not answer", "activity_exec_id", k.ActivityExecID, "error", err)
			case errors.Is(err, state.ErrInvalidItem):
				l.undecodable.Add(1) // the activity or its workflow; reported by the store
			case err != nil:
				l.log.Warn("launch attempt failed", "activity_exec_id", k.ActivityExecID, "error", err)
			}
			if launched {
				p.launched.Add(1)
			}
		}()
	}
	return p, nil
}

// fair orders a pass's activities so that every workflow gets its turn:
// one of each workflow, then a second of each, and so on, the workflows
// and each one's activities in random order, so that launchers reading
// the same index spread out over it. A workflow with a thousand ready
// activities does not hold up one with three.
func fair(refs []state.ActivityRef, only string) []state.ActivityRef {
	by := map[string][]state.ActivityRef{}
	var order []string
	for _, r := range refs {
		if only != "" && r.WorkflowExecID != only {
			continue
		}
		if by[r.WorkflowExecID] == nil {
			order = append(order, r.WorkflowExecID)
		}
		by[r.WorkflowExecID] = append(by[r.WorkflowExecID], r)
	}
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, rs := range by {
		rand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	}
	out := make([]state.ActivityRef, 0, len(refs))
	for round := 0; len(out) < cap(out); round++ {
		added := false
		for _, w := range order {
			if rs := by[w]; round < len(rs) {
				out = append(out, rs[round])
				added = true
			}
		}
		if !added {
			break
		}
	}
	return out
}

// scan is how many READY index entries one pass reads.
const scan = 1000

// pass remembers, for one pass, what it read of each workflow, and counts
// its launches.
type pass struct {
	wg       sync.WaitGroup
	launched atomic.Int64

	mu        sync.Mutex
	workflows map[string]*passWorkflow
	down      error // the store did not answer a launch: hand out no more
}

// unavailable records that the store did not answer one of the pass's
// launches.
func (p *pass) unavailable(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down == nil {
		p.down = err
	}
}

// storeErr is the error of a launch the store did not answer, if any.
func (p *pass) storeErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

type passWorkflow struct {
	state state.WorkflowState
	def   *workflow.Definition // nil: its activities cannot be launched
}

// forgetEnded drops the activities we launched that have ended, when a cap
// makes counting them matter.
func (l *Launcher) forgetEnded(ctx context.Context) error {
	if l.cfg.MaxRunning <= 0 {
		return nil
	}
	l.mu.Lock()
	keys := make([]state.ActivityKey, 0, len(l.running))
	for k := range l.running {
		keys = append(keys, k)
	}
	l.mu.Unlock()
	for _, k := range keys {
		a, err := l.st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrInvalidItem) {
			// Another client made it unreadable: whether it ended cannot
			// be told, and it must not hold a slot for ever.
			l.undecodable.Add(1)
		} else if err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		if err != nil || a.State.Terminal() {
			l.mu.Lock()
			delete(l.running, k)
			l.mu.Unlock()
		}
	}
	return nil
}

// workflow reads a workflow once per pass, with its definition.
func (l *Launcher) workflow(ctx context.Context, p *pass, id string) (*passWorkflow, error) {
	p.mu.Lock()
	w := p.workflows[id]
	p.mu.Unlock()
	if w != nil {
		return w, nil
	}
	wf, err := l.st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	w = &passWorkflow{state: wf.State}
	if wf.State == state.WorkflowRunning {
		if w.def, err = l.definition(wf); err != nil {
			l.log.Warn("cannot launch the activities of a workflow", "workflow_exec_id", id, "error", err)
		}
	} else {
		l.mu.Lock()
		delete(l.defs, id) // it will not launch again
		l.mu.Unlock()
	}
	p.mu.Lock()
	p.workflows[id] = w
	p.mu.Unlock()
	return w, nil
}

// try claims and launches one activity; launched is true when the backend
// started it.
func (l *Launcher) try(ctx context.Context, p *pass, k state.ActivityKey) (launched bool, err error) {
	// The index is eventually consistent: read the item itself.
	a, err := l.st.GetActivity(ctx, k)
	if err != nil {
		return false, err
	}
	if a.State != state.Ready {
		return false, nil
	}
	if !a.NotBefore.IsZero() && clock.Now().Before(a.NotBefore) {
		l.mu.Lock()
		l.waiting[k] = a.NotBefore
		l.mu.Unlock()
		return false, nil // a retry waiting out its delay
	}
	w, err := l.workflow(ctx, p, k.WorkflowExecID)
	if err != nil {
		return false, err
	}
	if w.state != state.WorkflowRunning || w.def == nil {
		return false, nil // the monitor cancels what a settled workflow left
	}
	act := w.def.Activities[a.ActivityName]
	var settings workflow.Settings
	var backend Backend
	if act != nil {
		settings = w.def.Effective(a.ActivityName)
		if backend = l.cfg.Backends[settings.Launch.Type]; backend == nil {
			return false, nil // for a launcher with that backend
		}
	}
	if ctx.Err() != nil {
		return false, nil // stopping: claim nothing more
	}

	// Claimed or not, the claim's answer must be known, and a claimed
	// activity must end launched or failed: from here on, every store
	// call has a fresh context with its own deadline.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	claimed, err := l.claim(cctx, k)
	cancel()
	if claimed == nil || err != nil {
		return false, err
	}
	log := l.log.With("activity_exec_id", k.ActivityExecID)
	if act == nil {
		return false, l.fail(ctx, claimed, fmt.Errorf("activity %q is not in the workflow's definition", a.ActivityName))
	}
	job := l.job(claimed, w.def, act, settings)
	job.Token = claimed.Owner
	launchedAs, err := l.launch(ctx, backend, job, log)
	if err != nil {
		log.Warn("launch failed", "error", err)
		return false, l.fail(ctx, claimed, err)
	}
	log.Info("launched", "as", launchedAs, "type", settings.Launch.Type)
	// The wrapper may have moved on already; the record goes beside
	// whatever state it finds.
	if err := l.record(ctx, func(rctx context.Context) error {
		_, err := l.st.UpdateActivity(rctx, k, state.ActivityChange{From: state.ActivityStates, LaunchedAs: launchedAs})
		return err
	}); err != nil {
		log.Warn("recording the launch failed", "as", launchedAs, "error", err)
	}
	return true, nil
}

// launch calls the backend until it starts the activity, fails for good,
// or the launch deadline passes. Each call has its own deadline; a call
// cut off by it may have started the activity, so it is tried again with
// the same job, whose launch token the backend deduplicates. When ctx ends
// the call in flight finishes, but no new attempt is made.
func (l *Launcher) launch(ctx context.Context, backend Backend, j Job, log hclog.Logger) (string, error) {
	retryFor := l.cfg.RetryFor
	if rf := time.Duration(j.Settings.Launch.RetryFor); rf > 0 {
		retryFor = rf
	} else {
		// The monitor fails an activity QUEUED for longer than its queued
		// timeout: give up well before it.
		qt := time.Duration(j.Settings.QueuedTimeout)
		if qt == 0 {
			qt = workflow.DefaultQueuedTimeout
		}
		retryFor = min(retryFor, qt*3/4)
	}
	callTimeout := l.cfg.CallTimeout
	if p, ok := backend.(patient); ok {
		callTimeout = max(callTimeout, p.CallTimeout())
	}
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(retryFor))
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = l.cfg.RetryInterval
	b.Multiplier = 2
	b.MaxInterval = max(maxRetryInterval, l.cfg.RetryInterval)
	b.MaxElapsedTime = 0 // rctx's deadline ends the retries
	var as string
	var last error
	attempts := 0
	unknown := false // an attempt was cut off: it may have started the activity
	err := backoff.RetryNotify(func() error {
		if unknown {
			// Before repeating a launch that may have happened, look: a
			// wrapper that claimed the activity proves the launch, and a
			// repeat could start a second container or task (Docker's
			// --rm frees the name once the first has exited).
			done, err := l.claimedSince(ctx, j)
			if err != nil {
				last = err
				return backoff.Permanent(err)
			}
			if done != "" {
				as = done
				return nil
			}
		}
		attempts++
		callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		var err error
		as, err = backend.Launch(callCtx, j)
		var temp *TemporaryError
		switch {
		case err == nil:
			return nil
		case errors.Is(callCtx.Err(), context.DeadlineExceeded):
			unknown = true
			last = fmt.Errorf("no answer within %s (the launch may have happened: it is tried again under the same launch token %s): %w",
				callTimeout, token(j), err)
			return last
		case errors.As(err, &temp):
			last = err
			return err
		}
		last = err
		return backoff.Permanent(err)
	}, backoff.WithContext(b, rctx), func(err error, wait time.Duration) {
		log.Warn("launch failed for a reason that may pass; trying again", "error", err, "in", wait.Round(time.Millisecond), "attempt", attempts)
	})
	switch {
	case err == nil:
		return as, nil
	case last == nil:
		return "", err
	case ctx.Err() != nil && time.Since(start) < retryFor:
		return "", fmt.Errorf("the launcher stopped while retrying the launch (%d attempts): %w", attempts, last)
	case errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("gave up after %s and %d attempts: %w", time.Since(start).Round(time.Second), attempts, last)
	}
	return "", err
}

// claimedSince reads the activity before a launch whose outcome is unknown
// is repeated. It returns what is known of the launch when a wrapper has
// claimed the activity since (the launch happened: it must not be
// repeated), "" when the activity is still QUEUED under this launch's
// token (nothing claimed it yet: the repeat goes ahead, deduplicated by
// the backend while the first container or task lives), and an error when
// the activity has moved on without a claim (cancelled, or failed by
// Exited): there is nothing left to launch.
func (l *Launcher) claimedSince(ctx context.Context, j Job) (string, error) {
	var a *state.ActivityExec
	err := l.record(ctx, func(rctx context.Context) error {
		var err error
		a, err = l.st.GetActivity(rctx, j.Key)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("reading the activity before repeating a launch whose answer was lost: %w", err)
	}
	switch {
	case a.State == state.Queued && a.Owner == j.Token:
		return "", nil
	case a.Owner != "" && a.Owner != j.Token:
		// A wrapper's claim replaced the launcher's token.
		where := "its wrapper claimed it"
		if a.Host != "" {
			where = fmt.Sprintf("its wrapper claimed it on host %s, pid %d", a.Host, a.PID)
		}
		return fmt.Sprintf("unknown: the launch call (launch token %s) was cut off before its answer, and %s", token(j), where), nil
	}
	return "", fmt.Errorf("the launch call was cut off before its answer, and the activity is now %s without a wrapper's claim: not launching it again", a.State)
}

// record runs one recording write on a fresh context with its own
// deadline, retrying what may pass, so that neither an expired launch nor
// a shutdown can leave the outcome unwritten.
func (l *Launcher) record(ctx context.Context, write func(context.Context) error) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxElapsedTime = 0
	var last error
	err := backoff.Retry(func() error {
		err := write(rctx)
		if err != nil && (errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound)) {
			return backoff.Permanent(err)
		}
		if err != nil {
			last = err
		}
		return err
	}, backoff.WithContext(b, rctx))
	if err != nil && last != nil && errors.Is(err, context.DeadlineExceeded) {
		return last
	}
	return err
}

// claim moves a READY activity to QUEUED under a fresh token, and returns
// it when the move was this launcher's, nil when another launcher's. A
// write whose answer was lost (the SDK resends it, and the resend finds its
// own earlier move) is recognised by the token.
func (l *Launcher) claim(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	token := "launcher:" + uuid.NewString()
	claimed, err := l.st.UpdateActivity(ctx, k, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: token,
	})
	var ce *state.ConflictError
	switch {
	case err == nil:
		return claimed, nil
	case errors.As(err, &ce) && ce.Owner != token:
		return nil, nil // another launcher was first
	case errors.As(err, &ce):
		// Our own move landed; fall through to read it.
	}
	// The read-back is retried as a record is: a claim that landed and is
	// not launched stays QUEUED until the monitor fails it, unrun.
	var a *state.ActivityExec
	rerr := l.record(ctx, func(rctx context.Context) error {
		var err error
		a, err = l.st.GetActivity(rctx, k)
		return err
	})
	if rerr != nil {
		return nil, fmt.Errorf("claim %s: %w (and reading it back: %v)", k.ActivityExecID, err, rerr)
	}
	if a.State == state.Queued && a.Owner == token {
		return a, nil
	}
	return nil, nil
}

// Exited is told that the process a backend started for j has ended. If
// the wrapper never claimed the activity (it is still QUEUED under the
// launcher's token), it will never run: it is failed now, with why,
// instead of waiting for the queued timeout. Under MaxRunning the process's
// slot is free at once, and a pass starts to fill it.
func (l *Launcher) Exited(ctx context.Context, j Job, status string) {
	if l.cfg.MaxRunning > 0 {
		// Its process is gone, so it holds no slot any more (forgetEnded
		// would learn so from the store at a later pass). A process that
		// ended while its launch is still being recorded is noted, so
		// that the launch does not count it as running.
		l.mu.Lock()
		delete(l.running, j.Key)
		if l.busy[j.Key] {
			l.exited[j.Key] = true
		}
		l.mu.Unlock()
		l.wake()
	}
	if j.Token == "" || status == exitedOK {
		// whimbrel-run exits 0 only after its claim (a refused claim,
		// or a signal before it, exits otherwise): there is nothing to
		// fail, and the conditional write that would find so costs a
		// write of the store per activity.
		return
	}
	msg := fmt.Sprintf("whimbrel-run exited (%s) before claiming the activity", status)
	failed, err := l.st.UpdateActivity(ctx, j.Key, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: j.Token,
		Error: msg, Reason: "launch failed: " + msg,
	})
	if err != nil {
		if !errors.Is(err, state.ErrConflict) { // claimed after all: its wrapper recorded the rest
			l.log.Warn("recording a wrapper that never claimed failed", "activity_exec_id", j.Key.ActivityExecID, "error", err)
		}
		return
	}
	l.log.Warn("a wrapper exited before claiming its activity", "activity_exec_id", j.Key.ActivityExecID, "status", status)
	if _, err := workflow.Advance(ctx, l.st, failed, l.log.Named("advance")); err != nil {
		l.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
}

// fail records a launch that did not happen and advances the workflow,
// on a fresh context: the launch's own deadline may be spent.
func (l *Launcher) fail(ctx context.Context, a *state.ActivityExec, cause error) error {
	msg := cause.Error()
	var failed *state.ActivityExec
	err := l.record(ctx, func(rctx context.Context) error {
		var err error
		failed, err = l.st.UpdateActivity(rctx, a.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: a.Owner,
			Error: msg, Reason: "launch failed: " + msg,
		})
		return err
	})
	if errors.Is(err, state.ErrConflict) {
		return nil // no longer ours: its wrapper claimed it, or it was cancelled
	}
	if err != nil {
		return fmt.Errorf("record the failed launch of %s: %w", a.ActivityExecID, err)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err = workflow.Advance(actx, l.st, failed, l.log.Named("advance"))
	return err
}

func (l *Launcher) definition(wf *state.WorkflowExec) (*workflow.Definition, error) {
	l.mu.Lock()
	d := l.defs[wf.WorkflowExecID]
	l.mu.Unlock()
	if d != nil {
		return d, nil
	}
	if wf.Definition == "" {
		return nil, fmt.Errorf("workflow %s has no stored definition (it was not started with whimbrel start), so its activities cannot be launched from here", wf.WorkflowExecID)
	}
	d, err := workflow.ParseStored(wf.Definition)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: %w", wf.WorkflowExecID, err)
	}
	l.mu.Lock()
	l.defs[wf.WorkflowExecID] = d
	l.mu.Unlock()
	return d, nil
}

// job builds what the backend needs.
func (l *Launcher) job(a *state.ActivityExec, def *workflow.Definition, act *workflow.Activity, s workflow.Settings) Job {
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	for k, v := range l.cfg.StoreEnv {
		env[k] = v
	}
	env[state.EnvActivityExecID] = a.ActivityExecID
	env[state.EnvActivityName] = a.ActivityName
	env[state.EnvWorkflowExecID] = a.WorkflowExecID
	env[state.EnvWorkflowName] = def.Name
	for name, d := range map[string]workflow.Duration{
		state.EnvHeartbeatInterval: s.HeartbeatInterval,
		state.EnvHeartbeatTimeout:  s.HeartbeatTimeout,
		state.EnvTimeout:           s.Timeout,
		state.EnvKillGrace:         s.KillGrace,
	} {
		if d > 0 {
			env[name] = time.Duration(d).String()
		}
	}
	return Job{Key: a.ActivityKey, WorkflowName: def.Name, ActivityName: a.ActivityName, Attempt: a.Attempt,
		Command: act.Command, Env: env, Settings: s}
}

// launchNamespace seeds the name-based UUIDs that name launches.
var launchNamespace = uuid.MustParse("6f2b8c1a-3d4e-4f50-8a9b-0c1d2e3f4a5b")

// token names one launch of an activity, the same every time it is
// computed, for backends that refuse a second launch of one name (ECS's
// clientToken, Docker's container names).
func token(j Job) string {
	return uuid.NewSHA1(launchNamespace, []byte(j.Key.ActivityExecID+"/"+strconv.Itoa(j.Attempt))).String()
}
