package state

import (
	"context"
	"errors"
	"fmt"
)

// A READY activity that waits for a full pool is set aside ("parked") so
// that it does not crowd the READY listing that launchers read each pass:
// one conditional write marks it with its pool (the attribute pool_wait),
// which takes it out of ActivitiesInState's READY listing and into its
// pool's queue of parked waiters, oldest first. Its state stays READY and
// its state time unchanged, so a reader that knows only the base contract
// still sees it READY (docs/contract.md#pools). Whoever frees slots, or
// finds them free, puts the oldest parked waiters back with Refill; the
// monitor's sweep does it too, for a writer that died in between.

// AttrPoolWait marks a READY activity parked in a pool's queue: its value
// is the pool's name.
const AttrPoolWait = "pool_wait"

// PoolQueue is what a store offers to park the waiters of full pools.
// Both stores implement it.
type PoolQueue interface {
	// Park marks a READY activity as a parked waiter of pool, in one
	// write conditional on its being READY; a *ConflictError when it is
	// not.
	Park(ctx context.Context, k ActivityKey, pool string) error
	// Unpark puts a parked activity back in the READY listing, in one
	// write conditional on its being READY; a *ConflictError when it is
	// not (it moved on, and left the queue with its move).
	Unpark(ctx context.Context, k ActivityKey) error
	// Parked lists a pool's parked waiters, oldest first by state time
	// then ID, at most limit of them (0: all). On DynamoDB it is read
	// through an index: a waiter parked or put back a moment ago may be
	// missing or listed still.
	Parked(ctx context.Context, pool string, limit int) ([]ActivityRef, error)
}

// Room is how many slots of a pool are free (0 when it is not defined).
func Room(p *Pool, shards []*PoolShard) int {
	if p == nil {
		return 0
	}
	n := 0
	for _, s := range shards {
		n += max(0, s.Capacity-s.Held())
	}
	return n
}

// Refill puts back in the READY listing the oldest parked waiters of a
// pool, one for each free slot (each waiter takes at least one), so that
// the launchers let them in by their order. Whoever frees slots calls it,
// and so does whoever finds slots free while waiters are parked: a waiter
// parked just as a slot was freed is put back by the next look. It
// returns how many it put back; one that moved on meanwhile is not
// counted and is no error. A store that parks nothing (no PoolQueue) has
// nothing to put back.
func Refill(ctx context.Context, ps PoolStore, pool string) (int, error) {
	q, ok := ps.(PoolQueue)
	if !ok {
		return 0, nil
	}
	p, shards, err := ps.PoolItems(ctx, pool)
	if err != nil {
		return 0, fmt.Errorf("refill pool %s: %w", pool, err)
	}
	room := Room(p, shards)
	if room == 0 {
		return 0, nil
	}
	return unparkOldest(ctx, q, pool, room)
}

// UnparkAll puts back every parked waiter of a pool: a deleted pool's
// waiters are then shown and judged with the other READY activities.
func UnparkAll(ctx context.Context, ps PoolStore, pool string) (int, error) {
	q, ok := ps.(PoolQueue)
	if !ok {
		return 0, nil
	}
	return unparkOldest(ctx, q, pool, 0)
}

func unparkOldest(ctx context.Context, q PoolQueue, pool string, n int) (int, error) {
	refs, err := q.Parked(ctx, pool, n)
	if _, err = Skipped(err); err != nil {
		return 0, fmt.Errorf("refill pool %s: %w", pool, err)
	}
	put := 0
	for _, r := range refs {
		err := q.Unpark(ctx, r.ActivityKey)
		switch {
		case err == nil:
			put++
		case !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound):
			return put, fmt.Errorf("refill pool %s: %w", pool, err)
		}
	}
	return put, nil
}
