// Package launcher is the contract's activity launcher: it finds READY
// activities through the state index, claims each with one conditional
// write to QUEUED, starts it through a Backend (a local process, a Docker
// container, an ECS task) and records what it started. Activities that wait
// on nothing are readied by workflow.Start (or, after a crash, by the
// monitor), so REQUESTED ones need not be searched.
// Any number of launchers may run at once: the conditional write decides
// which one launches an activity, so none is launched twice.
//
// The backends are packages of their own (launcher/local, launcher/docker,
// launcher/ecs), each built by the command that serves its launch type and
// handed to the launcher in Config.Backends: a binary links only the
// backends it wires.
package launcher

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

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

// Config configures a Launcher.
type Config struct {
	// Backends by launch type (definition.LaunchLocal, …). Activities of a
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
	// Observer, when set, is told of each launch and each failed one.
	Observer Observer
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

	workers chan struct{} // one per worker
	wg      sync.WaitGroup
	// freed wakes Run when a local child exits under MaxRunning: its slot
	// is free at once, not at the next poll.
	freed chan struct{}

	slots *slots      // what it tries and runs, and the cap
	defs  definitions // of the workflows it launches for
	pools poolWaiters // the activities waiting for pools (pool.go)
	due   dueWindows  // the windows of parked retries read (retrysoon.go)
	// family is cfg.Workflow's and its child workflows', the executions a
	// launcher limited to one launches for.
	family *workflow.Family

	// undecodable counts the items passes skipped because they could not
	// be decoded (the store reports each one).
	undecodable atomic.Int64

	handoff  *handoff     // the activities readied in process (handoff.go)
	listings atomic.Int64 // the passes that listed the READY index
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
	return &Launcher{st: st, cfg: cfg, log: cfg.Logger, workers: make(chan struct{}, cfg.Workers), freed: make(chan struct{}, 1),
		slots: newSlots(cfg.MaxRunning), defs: definitions{byID: map[string]*definition.Workflow{}},
		family: workflow.NewFamily(cfg.Workflow), handoff: newHandoff()}
}

// Run polls until ctx ends, then returns once the launches in flight have
// been recorded. It returns nil on a clean stop. A pass does not wait for
// its launches: the next one starts on time and leaves alone the
// activities still being launched.
func (l *Launcher) Run(ctx context.Context) error {
	defer l.waitGuards()
	defer l.wg.Wait()
	defer l.startTenders(ctx)()
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	list := true // a pass woken by a handoff alone tries what was handed
	for {
		// A handoff whose keys an earlier pass took already leaves its
		// wake with nothing to try: no pass is made for it.
		if keys, dropped := l.handoff.pending(); list || keys || dropped {
			if _, err := l.passOf(ctx, list); err != nil && ctx.Err() == nil {
				l.log.Warn("poll failed; trying again at the next one", "error", err)
			}
		}
		list = true
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-l.cfg.Nudge:
		case <-l.freed:
		case <-l.handoff.handed:
			list = false
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
func (l *Launcher) pass(ctx context.Context) (*pass, error) { return l.passOf(ctx, true) }

// passOf is a pass that lists the READY index when list is set, and
// otherwise tries only the activities handed to it (readyRefs).
func (l *Launcher) passOf(ctx context.Context, list bool) (*pass, error) {
	if err := l.forgetEnded(ctx); err != nil {
		return nil, err
	}
	l.refillParked(ctx)
	// A pass that tries only handed keys knows too little of the pools'
	// waiters to order them: it neither reads the pools nor replaces what
	// the launcher remembers of their waiters (admitPools), and a handed
	// activity of a pool goes through its try's poolGate, which parks it
	// or wakes a pass that lists.
	var looks map[string]*poolLook
	if _, dropped := l.handoff.pending(); list || dropped {
		looks = l.lookAtPools(ctx)
	}
	// Only a pass that lists reads the retries fallen due: a pass that
	// takes what an inline advance handed over keeps the hop short, and
	// the next listing pass (within the interval) reads them.
	var due []state.ActivityRef
	if list {
		due = l.putBackDue(ctx) // retrysoon.go
	}
	refs, listed, err := l.readyRefs(ctx, list) // handoff.go
	// One item that does not decode never stops the launches of the
	// others: the store reported it, and the pass goes on without it.
	skipped, err := state.Skipped(err)
	if err != nil {
		return nil, err
	}
	l.undecodable.Add(int64(len(skipped)))
	p := &pass{workflows: map[string]*passWorkflow{}, crowded: len(refs) >= scan}
	refs = withDue(refs, due)
	// A launcher limited to one workflow (whimbrel run) serves it and its
	// child workflows only.
	refs = l.inFamily(ctx, refs)
	var admitted []state.ActivityRef
	var poolIn map[string]string
	if listed {
		admitted, refs, poolIn = l.admitPools(ctx, refs, looks, p.crowded)
	}
	p.poolIn = poolIn
	order := poolOrder{in: poolIn}
	now := clock.Now()
	l.slots.prune(now)
	for _, ref := range append(admitted, fair(refs, "")...) {
		k := ref.ActivityKey
		if ctx.Err() != nil || p.storeErr() != nil {
			break
		}
		if order.skip(k) {
			continue
		}
		ok, full := l.slots.take(k, now)
		if full {
			break
		}
		if !ok {
			order.notTaken(k)
			continue
		}
		select {
		case l.workers <- struct{}{}:
		case <-ctx.Done():
			l.slots.release(k)
			return p, nil
		}
		if p.storeErr() != nil { // a try that ended while this one waited for a worker
			<-l.workers
			l.slots.release(k)
			break
		}
		p.wg.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer p.wg.Done()
			defer func() { <-l.workers }()
			launched, err := l.try(ctx, p, ref)
			if l.slots.done(k, launched) {
				l.wake() // its process exited while the launch was recorded
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
// in random order and each one's activities oldest first, shuffled a
// little (oldestFirst), so that launchers reading the same index spread
// out over it. A workflow with a thousand ready
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
		oldestFirst(rs)
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
	down      error               // the store did not answer a launch: hand out no more
	poolIn    map[string]string   // the pool waiters the pass let in, and their pools (pool.go)
	poolReads map[string]poolRead // the pools its tries read to park waiters (park.go)
	crowded   bool                // its READY listing filled the window: waiters of full pools are parked
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
	def   *definition.Workflow // nil: its activities cannot be launched
	item  *state.WorkflowExec  // its item, with state as this pass read it (nil: not kept)
}

// forgetEnded drops the activities we launched that have ended, when a cap
// makes counting them matter.
func (l *Launcher) forgetEnded(ctx context.Context) error {
	if l.cfg.MaxRunning <= 0 {
		return nil
	}
	for _, k := range l.slots.running() {
		a, err := l.st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrInvalidItem) {
			// Another client made it unreadable: whether it ended cannot
			// be told, and it must not hold a slot for ever.
			l.undecodable.Add(1)
		} else if err != nil && !errors.Is(err, state.ErrNotFound) {
			return err
		}
		// A READY item was put back by a client outside the contract
		// (no claimed activity returns to READY): it is not running, and
		// a pass may try it again once its slot is free.
		if err != nil || a.State.Terminal() || a.State == state.Ready {
			l.slots.ended(k)
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
	if w, ok, err := l.knownWorkflow(ctx, id); ok { // passread.go
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.workflows[id] = w
		p.mu.Unlock()
		return w, nil
	}
	wf, err := l.st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	w = &passWorkflow{state: wf.State}
	if wf.State == state.WorkflowRunning {
		if w.def, err = l.defs.of(wf); err != nil {
			l.log.Warn("cannot launch the activities of a workflow", "workflow_exec_id", id, "error", err)
		}
		w.item = wf
	} else {
		l.defs.forget(id) // it will not launch again
	}
	p.mu.Lock()
	p.workflows[id] = w
	p.mu.Unlock()
	return w, nil
}
