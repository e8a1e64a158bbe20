package launcher

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// Pools (state.PoolStore): an activity in a pool is launched only while it
// holds its slots. The launcher takes them between its read of the READY
// item and its claim, and gives them back when the claim finds the
// activity gone; the participant that records the activity's end frees
// them otherwise (workflow.Advance).
//
// Waiters are served oldest first, whatever launcher serves them: the
// first time a pass meets an activity of a pool it only remembers it (its
// pool, its slots, whether this launcher has its backend) and starts
// another pass. From then on each pass reads each pool that has waiters
// once (one consistent query), walks its waiters oldest first by the time
// they became READY, and lets in those that fit, stopping at the first
// that does not: no newer waiter overtakes an older one, and one that
// another launcher's backend serves is counted as let in (it is that
// launcher's to start). The waiters that stay cost no read of their own.

// poolWaiter is an activity a pass found waiting for a pool.
type poolWaiter struct {
	key   state.ActivityKey
	pool  string
	slots int
	since time.Time // when it became READY
	mine  bool      // this launcher has its backend
	// parked: it waits in its pool's queue, not in the READY listing
	// (park.go).
	parked bool
}

// poolWaiters is what the launcher remembers of the activities waiting
// for pools. It is safe for concurrent use.
type poolWaiters struct {
	mu   sync.Mutex
	byID map[string]poolWaiter
	// read holds the READY activities a try has read with their
	// workflow, so that whether they are in a pool is known: a pass
	// lets no waiter in ahead of an older activity not read yet, which
	// may be of the same pool.
	read map[string]bool
	// parkedInto holds the pools this launcher parked waiters into
	// since its last pass (park.go).
	parkedInto map[string]bool
}

// mark notes that a try has read the activity id.
func (w *poolWaiters) mark(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.read == nil {
		w.read = map[string]bool{}
	}
	w.read[id] = true
}

// remember notes a waiter met by a try.
func (w *poolWaiters) remember(pw poolWaiter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[string]poolWaiter{}
	}
	w.byID[pw.key.ActivityExecID] = pw
	if w.read == nil {
		w.read = map[string]bool{}
	}
	w.read[pw.key.ActivityExecID] = true
}

// admitPools splits a pass's READY activities into the pool waiters it
// lets in, oldest first, and the others (not yet known to be in a pool).
// The waiters it does not let in are in neither. It forgets the waiters
// the pass did not read: they are no longer READY.
func (l *Launcher) admitPools(ctx context.Context, refs []state.ActivityRef, looks map[string]*poolLook, crowded bool) (admitted []state.ActivityRef, rest []state.ActivityRef, in map[string]string) {
	l.pools.mu.Lock()
	known := l.pools.byID
	seen := map[string]poolWaiter{}
	read := map[string]bool{}
	byPool := map[string][]poolWaiter{}
	var unread time.Time // the oldest READY activity not read yet
	for _, r := range refs {
		if l.pools.read[r.ActivityExecID] {
			read[r.ActivityExecID] = true
		} else if unread.IsZero() || r.StateTime.Before(unread) {
			unread = r.StateTime
		}
		w, ok := known[r.ActivityExecID]
		if !ok || w.key != r.ActivityKey {
			rest = append(rest, r)
			continue
		}
		w.since = r.StateTime
		seen[r.ActivityExecID] = w
		byPool[w.pool] = append(byPool[w.pool], w)
	}
	l.pools.byID = seen
	l.pools.read = read
	l.pools.mu.Unlock()
	if len(byPool) == 0 {
		return nil, rest, nil
	}
	ps, ok := l.st.(state.PoolStore)
	if !ok {
		return nil, rest, nil // a store without pools: their activities wait
	}
	names := make([]string, 0, len(byPool))
	for n := range byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	in = map[string]string{}
	now := clock.Now()
	for _, name := range names {
		ws := byPool[name]
		sortWaiters(ws)
		if !unread.IsZero() {
			// Nothing overtakes an activity not read yet: the next
			// pass knows whether it is of this pool.
			n := sort.Search(len(ws), func(i int) bool { return !ws[i].since.Before(unread) })
			ws = ws[:n]
		}
		for _, w := range l.admitPool(ctx, ps, name, ws, now, looks[name], crowded) {
			admitted = append(admitted, state.ActivityRef{ActivityKey: w.key, StateTime: w.since})
			in[w.key.ActivityExecID] = name
		}
	}
	return admitted, rest, in
}

// admitPool returns the waiters of one pool that this launcher may try
// now, oldest first.
func (l *Launcher) admitPool(ctx context.Context, ps state.PoolStore, name string, ws []poolWaiter, now time.Time, look *poolLook, crowded bool) []poolWaiter {
	if look == nil {
		look = l.lookAtPool(ctx, ps, name)
	}
	if look.err != nil {
		l.log.Warn("reading a pool failed; its activities wait", "pool", name, "error", look.err)
		return nil
	}
	p, shards, parked := look.pool, look.shards, look.parked
	if p == nil {
		return nil // not defined: they wait, and the views say why
	}
	var err error
	ws = withParked(ws, name, parked)
	var out []poolWaiter
	var unpark, park []state.ActivityKey
	defer func() {
		l.unparkAll(ctx, name, unpark)
		l.parkAll(ctx, name, park)
	}()
	taken := map[int]int{}
	reviewed := false
	for n, w := range ws {
		if state.Holds(shards, w.key) {
			// It took its slots in an earlier try that did not get to
			// its claim: try it again, whoever's it is.
			if w.mine {
				out = append(out, w)
			}
			continue
		}
		i, fits := state.Fits(shards, taken, w.slots)
		if !fits && !reviewed && lapsed(shards, now) {
			reviewed = true
			if n, err := state.ReviewLeases(ctx, ps, l.st, name, shards, now); err != nil {
				l.log.Warn("reviewing a pool's leases failed", "pool", name, "error", err)
			} else if n > 0 {
				l.log.Info("freed pool slots whose activity no longer runs", "pool", name, "freed", n)
			}
			if _, shards, err = ps.PoolItems(ctx, name); err != nil {
				return out
			}
			i, fits = state.Fits(shards, taken, w.slots)
		}
		if !fits {
			// No newer waiter overtakes this one: the pool is full for
			// them all, and those of the window are parked.
			for _, w := range ws[n:] {
				if crowded && !w.parked && parkable(p, shards, w.key, w.slots, taken) {
					park = append(park, w.key)
				}
			}
			break
		}
		taken[i] += w.slots
		switch {
		case w.parked:
			unpark = append(unpark, w.key) // the next pass lets it in
		case w.mine:
			out = append(out, w)
		}
	}
	return out
}

// lapsed reports whether a holder's lease has lapsed.
func lapsed(shards []*state.PoolShard, now time.Time) bool {
	for _, s := range shards {
		for _, h := range s.Holders {
			if h.LeaseUntil.Before(now) {
				return true
			}
		}
	}
	return false
}

// poolGate is a try's hook for an activity in a pool: it returns wait
// true when the activity must not be claimed now (it was not let in by
// the pass, or its slots could not be taken), with an error only for a
// store that failed.
func (l *Launcher) poolGate(ctx context.Context, p *pass, a *state.ActivityExec, s definition.Settings, mine bool) (wait bool, err error) {
	if !p.admittedPool(a.ActivityExecID) {
		w := poolWaiter{key: a.ActivityKey, pool: s.Pool, slots: s.PoolSlots, since: a.StateTime, mine: mine}
		// It is remembered either way: the READY listing of a lagging
		// index may show it a while after it is parked, and it is
		// ordered among the pool's waiters until it leaves.
		l.pools.remember(w)
		if l.parkIfFull(ctx, p, w) {
			return true, nil // its pool is full: it waits parked
		}
		l.wake() // the next pass orders it among the pool's waiters
		return true, nil
	}
	ps, ok := l.st.(state.PoolStore)
	if !ok {
		return true, nil
	}
	now := clock.Now()
	err = state.AcquireSlots(ctx, ps, s.Pool, state.PoolHolder{
		ActivityExecID: a.ActivityExecID, WorkflowExecID: a.WorkflowExecID, WorkflowName: a.WorkflowName, ActivityName: a.ActivityName,
		Slots: s.PoolSlots, Since: now, LeaseUntil: now.Add(state.PoolLease)})
	var we *state.PoolWaitError
	if errors.As(err, &we) {
		return true, nil // another launcher's holder came first: it waits
	}
	return err != nil, err
}

// poolUnclaimed gives back the slots taken for an activity whose claim
// this launcher did not win, unless the activity holds them now (another
// launcher claimed it under the same slots).
func (l *Launcher) poolUnclaimed(ctx context.Context, s definition.Settings, k state.ActivityKey) {
	ps, ok := l.st.(state.PoolStore)
	if !ok || s.Pool == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	a, err := l.st.GetActivity(rctx, k)
	if err == nil && state.HoldsSlots(a, clock.Now()) {
		return
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return // the lease review frees them if need be
	}
	if err := state.ReleaseSlots(rctx, ps, s.Pool, k); err != nil {
		l.log.Warn("releasing pool slots failed; they are freed when their lease lapses", "pool", s.Pool, "error", err)
		return
	}
	l.pools.noteParked(s.Pool) // the next pass puts back a parked waiter for them
}

// admittedPool reports whether the pass let the activity in.
func (p *pass) admittedPool(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.poolIn[id] != ""
}

// poolOrder keeps a pass from overtaking, within a pool, a waiter it let
// in but could not hand to a worker (an earlier pass's try of it is
// still under way): the later waiters of that pool wait for the next
// pass. It returns whether k may be handed out, and is told by taken
// whether it was.
type poolOrder struct {
	in      map[string]string
	blocked map[string]bool
}

func (o *poolOrder) skip(k state.ActivityKey) bool {
	pool := o.in[k.ActivityExecID]
	return pool != "" && o.blocked[pool]
}

func (o *poolOrder) notTaken(k state.ActivityKey) {
	if pool := o.in[k.ActivityExecID]; pool != "" {
		if o.blocked == nil {
			o.blocked = map[string]bool{}
		}
		o.blocked[pool] = true
	}
}
