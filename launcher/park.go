package launcher

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/whimbrel/whimbrel/state"
)

// Parking (state.PoolQueue): a READY activity that waits for a full pool
// is set aside in its pool's queue, so that the READY listing a pass reads
// holds what may be launched, however many wait. A pass whose listing
// fills its window parks the waiters it finds behind a full pool (one
// whose listing does not crowds nothing, and keeps every waiter in the
// listing, where the order is exact), and puts back, oldest first, the parked
// waiters that the pool has room for, before any newer waiter of the
// window is let in. The participants that free slots put back as many
// (workflow.Advance, the monitor's sweep); a waiter parked just as a slot
// was freed is put back by the next pass, which looks again at each pool
// the launcher parked into.

// poolLook is a pool as a pass read it, with the oldest of its parked
// waiters it has room for.
type poolLook struct {
	pool   *state.Pool
	shards []*state.PoolShard
	parked []state.ActivityRef
	err    error
}

// lookAtPools reads the pools of the waiters the launcher knows before
// the pass reads its READY listing: a waiter put back in between is then
// listed twice rather than missed, on an index that lags as well.
func (l *Launcher) lookAtPools(ctx context.Context) map[string]*poolLook {
	ps, ok := l.st.(state.PoolStore)
	if !ok {
		return nil
	}
	l.pools.mu.Lock()
	names := map[string]bool{}
	for _, w := range l.pools.byID {
		names[w.pool] = true
	}
	l.pools.mu.Unlock()
	looks := make(map[string]*poolLook, len(names))
	for name := range names {
		looks[name] = l.lookAtPool(ctx, ps, name)
	}
	return looks
}

// lookAtPool reads one pool, and its oldest parked waiters when it has
// room: they go before the waiters of the READY listing.
func (l *Launcher) lookAtPool(ctx context.Context, ps state.PoolStore, name string) *poolLook {
	p, shards, err := ps.PoolItems(ctx, name)
	look := &poolLook{pool: p, shards: shards, err: err}
	if q, ok := l.st.(state.PoolQueue); ok && err == nil {
		if room := state.Room(p, shards); room > 0 {
			look.parked, look.err = q.Parked(ctx, name, room)
		}
	}
	return look
}

// parkers bounds the writes a pass makes at once to park waiters.
const parkers = 16

// noteParked remembers that waiters were parked into a pool.
func (w *poolWaiters) noteParked(pool string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.parkedInto == nil {
		w.parkedInto = map[string]bool{}
	}
	w.parkedInto[pool] = true
}

// refillParked looks again, once, at each pool the launcher parked into
// since the last pass: a slot freed while the waiters were being parked
// found none of them to put back.
func (l *Launcher) refillParked(ctx context.Context) {
	l.pools.mu.Lock()
	into := l.pools.parkedInto
	l.pools.parkedInto = nil
	l.pools.mu.Unlock()
	ps, ok := l.st.(state.PoolStore)
	if !ok {
		return
	}
	for name := range into {
		if n, err := state.Refill(ctx, ps, name); err != nil {
			l.log.Warn("putting back the parked waiters of a pool failed; the monitor does it", "pool", name, "error", err)
		} else if n > 0 {
			l.log.Debug("put back parked waiters of a pool", "pool", name, "count", n)
		}
	}
}

// parkAll parks the waiters of one pool, a few at a time.
func (l *Launcher) parkAll(ctx context.Context, pool string, keys []state.ActivityKey) {
	q, ok := l.st.(state.PoolQueue)
	if !ok || len(keys) == 0 {
		return
	}
	l.pools.noteParked(pool)
	sem := make(chan struct{}, parkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l.parkOne(ctx, q, pool, k)
		}()
	}
	wg.Wait()
}

func (l *Launcher) parkOne(ctx context.Context, q state.PoolQueue, pool string, k state.ActivityKey) {
	err := q.Park(ctx, k, pool)
	if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		// It stays in the READY listing, and the next pass tries again.
		l.log.Warn("parking a waiter of a full pool failed", "pool", pool, "activity_exec_id", k.ActivityExecID, "error", err)
	}
}

// unparkAll puts parked waiters back in the READY listing.
func (l *Launcher) unparkAll(ctx context.Context, pool string, keys []state.ActivityKey) {
	q, ok := l.st.(state.PoolQueue)
	if !ok {
		return
	}
	for _, k := range keys {
		err := q.Unpark(ctx, k)
		if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
			l.pools.noteParked(pool) // the next pass looks again
			l.log.Warn("putting back a parked waiter failed", "pool", pool, "activity_exec_id", k.ActivityExecID, "error", err)
		}
	}
}

// parkIfFull parks an activity met for the first time whose pool is
// full for it, reading each pool at most once a pass. It reports whether
// it parked it.
func (l *Launcher) parkIfFull(ctx context.Context, p *pass, w poolWaiter) bool {
	pool := w.pool
	if !p.crowded {
		return false // the window holds every READY activity: it waits there, in order
	}
	ps, ok := l.st.(state.PoolStore)
	if _, queue := l.st.(state.PoolQueue); !ok || !queue {
		return false
	}
	p.mu.Lock()
	r, read := p.poolReads[pool]
	p.mu.Unlock()
	if !read {
		pl, shards, err := ps.PoolItems(ctx, pool)
		if err != nil {
			return false // it waits in the listing; the next pass reads the pool
		}
		r = poolRead{pool: pl, shards: shards}
		p.mu.Lock()
		if p.poolReads == nil {
			p.poolReads = map[string]poolRead{}
		}
		p.poolReads[pool] = r
		p.mu.Unlock()
	}
	if !parkable(r.pool, r.shards, w.key, w.slots, nil) {
		return false
	}
	l.parkAll(ctx, pool, []state.ActivityKey{w.key})
	return true
}

// poolRead is a pool as one pass read it.
type poolRead struct {
	pool   *state.Pool
	shards []*state.PoolShard
}

// parkable reports whether a waiter of n slots can be parked: its pool is
// defined and could hold it, it holds no slot yet, and it does not fit
// now (after taken).
func parkable(p *state.Pool, shards []*state.PoolShard, k state.ActivityKey, n int, taken map[int]int) bool {
	if p == nil || n > p.Slots || state.Holds(shards, k) {
		return false
	}
	_, fits := state.Fits(shards, taken, n)
	return !fits
}

// withParked merges into a pool's waiters of the window (sorted) the
// oldest parked ones its room could let in, so that none of the window
// overtakes them. A parked waiter is counted as taking one slot: how many
// it takes is known once it is back in the listing and read.
func withParked(ws []poolWaiter, pool string, parked []state.ActivityRef) []poolWaiter {
	if len(parked) == 0 {
		return ws
	}
	out := append([]poolWaiter(nil), ws...)
	listed := map[state.ActivityKey]bool{}
	for _, w := range ws {
		listed[w.key] = true
	}
	for _, r := range parked {
		if listed[r.ActivityKey] {
			continue // a lagging index lists it in both places
		}
		out = append(out, poolWaiter{key: r.ActivityKey, pool: pool, slots: 1, since: r.StateTime, parked: true})
	}
	sortWaiters(out)
	return out
}

// sortWaiters orders waiters oldest first, by the time they became READY
// and then by ID.
func sortWaiters(ws []poolWaiter) {
	sort.SliceStable(ws, func(i, j int) bool {
		if !ws[i].since.Equal(ws[j].since) {
			return ws[i].since.Before(ws[j].since)
		}
		return ws[i].key.ActivityExecID < ws[j].key.ActivityExecID
	})
}
