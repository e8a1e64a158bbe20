package state

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// poolRetries bounds the rereads after a conflicting write to one pool's
// items: each conflict means another participant's write landed, so the
// pool moved on and the next read sees it.
const poolRetries = 20

// SetPool defines a pool, or changes the size and description of one
// that is defined. The size takes effect at once: the shards' capacities
// are lowered before any is raised, so that at no moment do they add up
// to more than the larger of the old and the new size; slots held above a
// lowered capacity stay held (nothing running is stopped), and no new
// holder is let in until the shard is under it.
func SetPool(ctx context.Context, st PoolStore, name string, slots int, description string, now time.Time) (*Pool, error) {
	if err := CheckPool(name, slots); err != nil {
		return nil, err
	}
	var p *Pool
	grew := false
	for try := 0; ; try++ {
		cur, _, err := st.PoolItems(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("set pool %s: %w", name, err)
		}
		grew = cur == nil || slots > cur.Slots
		p = &Pool{Name: name, Slots: slots, Description: description, SetTime: now}
		prev := 0
		if cur != nil {
			prev = cur.Version
		}
		err = st.PutPool(ctx, p, prev)
		if errors.Is(err, ErrConflict) && try < poolRetries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("set pool %s: %w", name, err)
		}
		break
	}
	caps := shardCapacities(slots)
	// Lower first, then raise, so the sum never passes the larger size.
	for _, lowering := range []bool{true, false} {
		if err := setCapacities(ctx, st, name, caps, lowering); err != nil {
			return nil, fmt.Errorf("set pool %s: %w", name, err)
		}
	}
	if grew {
		// The waiters parked while it was full are let in at once (the
		// monitor's sweep does it if this fails).
		if _, err := Refill(ctx, st, name); err != nil {
			return p, fmt.Errorf("set pool %s: it is set, but its waiters wait for the monitor's next sweep: %w", name, err)
		}
	}
	return p, nil
}

// CheckPool returns an error saying what is wrong with a pool's name or
// size.
func CheckPool(name string, slots int) error {
	if err := CheckPoolName(name); err != nil {
		return err
	}
	if slots < 0 || slots > MaxPoolSlots {
		return fmt.Errorf("pool %s: --slots %d is out of range: give 0 to %d (0 holds every activity of the pool back)", name, slots, MaxPoolSlots)
	}
	return nil
}

// shardCapacities spreads slots over as few shards as SlotsPerShard
// allows, evenly.
func shardCapacities(slots int) []int {
	n := max(1, (slots+SlotsPerShard-1)/SlotsPerShard)
	caps := make([]int, n)
	for i := range caps {
		caps[i] = slots / n
		if i < slots%n {
			caps[i]++
		}
	}
	return caps
}

// setCapacities writes the capacities that move in one direction: down
// (and to 0 for shards beyond caps) when lowering, up otherwise.
func setCapacities(ctx context.Context, st PoolStore, name string, caps []int, lowering bool) error {
	for try := 0; ; try++ {
		_, shards, err := st.PoolItems(ctx, name)
		if err != nil {
			return err
		}
		byIndex := map[int]*PoolShard{}
		for _, s := range shards {
			byIndex[s.Index] = s
		}
		conflict := false
		last := len(caps)
		for _, s := range shards {
			last = max(last, s.Index+1)
		}
		for i := 0; i < last; i++ {
			want := 0
			if i < len(caps) {
				want = caps[i]
			}
			s := byIndex[i]
			have, prev := 0, 0
			if s != nil {
				have, prev = s.Capacity, s.Version
			} else {
				s = &PoolShard{Pool: name, Index: i}
			}
			if want == have && (prev > 0 || want == 0) {
				continue
			}
			if lowering != (want < have) {
				continue
			}
			next := *s
			next.Capacity = want
			if err := st.PutPoolShard(ctx, &next, prev); errors.Is(err, ErrConflict) {
				conflict = true
			} else if err != nil {
				return err
			}
		}
		if !conflict {
			return nil
		}
		if try >= poolRetries {
			return fmt.Errorf("the pool's slots kept changing while being resized: run it again")
		}
	}
}

// PoolStatus is a pool as the views show it.
type PoolStatus struct {
	Pool    *Pool        // nil: not defined
	Holders []PoolHolder // oldest first
	Held    int
}

// ReadPool reads a pool's definition and holders.
func ReadPool(ctx context.Context, st PoolStore, name string) (*PoolStatus, error) {
	p, shards, err := st.PoolItems(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read pool %s: %w", name, err)
	}
	out := &PoolStatus{Pool: p}
	for _, s := range shards {
		out.Holders = append(out.Holders, s.Holders...)
		out.Held += s.Held()
	}
	sortHolders(out.Holders)
	return out, nil
}

func sortHolders(hs []PoolHolder) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Since.Before(hs[j-1].Since); j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}

// AcquireSlots lets h into its pool if one shard has room for its slots,
// in one write conditional on the shard's version. It is idempotent: an
// activity that holds slots already is told so, and nothing is written.
// When the pool is full or not defined it returns a *PoolWaitError saying
// so; the caller leaves the activity READY.
func AcquireSlots(ctx context.Context, st PoolStore, pool string, h PoolHolder) error {
	if h.Slots < 1 {
		h.Slots = 1
	}
	for try := 0; ; try++ {
		p, shards, err := st.PoolItems(ctx, pool)
		if err != nil {
			return fmt.Errorf("take slots of pool %s: %w", pool, err)
		}
		if p == nil {
			return &PoolWaitError{Pool: pool, Reason: "not defined"}
		}
		if _, _, held := holding(shards, h.Key()); held {
			return nil
		}
		s := roomFor(shards, h)
		if s == nil {
			return &PoolWaitError{Pool: pool, Reason: WaitReason(p, shards, h.Slots)}
		}
		next := *s
		next.Holders = append(append([]PoolHolder(nil), s.Holders...), h)
		err = st.PutPoolShard(ctx, &next, s.Version)
		if errors.Is(err, ErrConflict) && try < poolRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("take slots of pool %s: %w", pool, err)
		}
		return nil
	}
}

// roomFor picks the shard that takes h: the first with room, starting
// from one chosen by the activity's ID, so that the holders of a large
// pool spread over its shards.
func roomFor(shards []*PoolShard, h PoolHolder) *PoolShard {
	if len(shards) == 0 {
		return nil
	}
	f := fnv.New32a()
	f.Write([]byte(h.ActivityExecID))
	start := int(f.Sum32() % uint32(len(shards)))
	for i := range shards {
		s := shards[(start+i)%len(shards)]
		if s.Held()+h.Slots <= s.Capacity {
			return s
		}
	}
	return nil
}

// WaitReason says why a holder of n slots does not fit in a pool (or, when
// it would, how full the pool is).
func WaitReason(p *Pool, shards []*PoolShard, n int) string {
	held := 0
	most := 0
	for _, s := range shards {
		held += s.Held()
		most = max(most, s.Capacity)
	}
	switch {
	case n > p.Slots:
		return fmt.Sprintf("needs %d slots, the pool has %d", n, p.Slots)
	case n > most:
		return fmt.Sprintf("needs %d slots, more than one shard of the pool holds (%d)", n, most)
	}
	return fmt.Sprintf("%d of %d slots held", held, p.Slots)
}

// Fits reports whether a holder of n slots would fit in the shards as
// given, after the holders counted in taken: what a launcher uses to let
// in the oldest waiters of a pass, without a write per waiter.
func Fits(shards []*PoolShard, taken map[int]int, n int) (int, bool) {
	for _, s := range shards {
		if s.Held()+taken[s.Index]+n <= s.Capacity {
			return s.Index, true
		}
	}
	return 0, false
}

// holding finds k among the shards' holders.
func holding(shards []*PoolShard, k ActivityKey) (*PoolShard, int, bool) {
	for _, s := range shards {
		for i, h := range s.Holders {
			if h.Key() == k {
				return s, i, true
			}
		}
	}
	return nil, 0, false
}

// Holds reports whether k holds slots of the pool whose shards are given.
func Holds(shards []*PoolShard, k ActivityKey) bool {
	_, _, ok := holding(shards, k)
	return ok
}

// ReleaseSlots removes k from its pool's holders, if it is one: the
// participant that records an activity's end calls it. Releasing what is
// not held writes nothing.
func ReleaseSlots(ctx context.Context, st PoolStore, pool string, k ActivityKey) error {
	for try := 0; ; try++ {
		_, shards, err := st.PoolItems(ctx, pool)
		if err != nil {
			return fmt.Errorf("release slots of pool %s: %w", pool, err)
		}
		s, i, ok := holding(shards, k)
		if !ok {
			return nil
		}
		next := *s
		next.Holders = append(append([]PoolHolder(nil), s.Holders[:i]...), s.Holders[i+1:]...)
		err = st.PutPoolShard(ctx, &next, s.Version)
		if errors.Is(err, ErrConflict) && try < poolRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("release slots of pool %s: %w", pool, err)
		}
		return nil
	}
}

// ActivityGetter reads one activity: what a lease review needs.
type ActivityGetter interface {
	GetActivity(ctx context.Context, key ActivityKey) (*ActivityExec, error)
}

// ReviewLeases looks at the holders of a pool whose lease lapsed before
// now: a holder whose activity is still queued, preparing or running
// keeps its slots for another PoolLease; any other is removed. It returns
// how many holders it removed. Slots are so never freed while their
// activity runs, and always freed, without an operator, once it does not.
func ReviewLeases(ctx context.Context, st PoolStore, acts ActivityGetter, pool string, shards []*PoolShard, now time.Time) (int, error) {
	return reviewLeases(ctx, st, acts, pool, shards, now, true, nil)
}

// FreeEnded removes the holders of a pool whose lease lapsed before now
// and whose activity no longer holds slots, as ReviewLeases does, but
// renews no lease: a shard is written only when it frees slots, so a
// participant that looks at every pool often (the monitor's sweep) does
// not rewrite the shards of activities that run long. live reports the
// activities the caller has just listed queued, preparing or running:
// their holders are left as they are without reading them. It returns
// how many holders it removed.
func FreeEnded(ctx context.Context, st PoolStore, acts ActivityGetter, pool string, shards []*PoolShard, now time.Time, live func(ActivityKey) bool) (int, error) {
	return reviewLeases(ctx, st, acts, pool, shards, now, false, live)
}

func reviewLeases(ctx context.Context, st PoolStore, acts ActivityGetter, pool string, shards []*PoolShard, now time.Time, renew bool, live func(ActivityKey) bool) (int, error) {
	freed := 0
	for _, s := range shards {
		var keep []PoolHolder
		changed := false
		removed := 0
		for _, h := range s.Holders {
			if !h.LeaseUntil.Before(now) || (live != nil && live(h.Key())) {
				keep = append(keep, h)
				continue
			}
			a, err := acts.GetActivity(ctx, h.Key())
			if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalidItem) {
				return freed, fmt.Errorf("review the leases of pool %s: %w", pool, err)
			}
			if err == nil && HoldsSlots(a, now) {
				if renew {
					h.LeaseUntil = now.Add(PoolLease)
					changed = true
				}
				keep = append(keep, h)
				continue
			}
			changed = true
			removed++
		}
		if !changed {
			continue
		}
		next := *s
		next.Holders = keep
		// A conflict means another participant changed the shard: it is
		// reviewed again at the next look.
		err := st.PutPoolShard(ctx, &next, s.Version)
		switch {
		case err == nil:
			freed += removed
		case !errors.Is(err, ErrConflict):
			return freed, fmt.Errorf("review the leases of pool %s: %w", pool, err)
		}
	}
	return freed, nil
}

// HoldsSlots reports whether an activity in its present state keeps the
// pool slots it took: from its launch until its final state, and past a
// cancel while its wrapper may still be stopping the command (a
// CANCELLED_RUNNING item without an end time, for about two heartbeat
// timeouts and a kill grace).
func HoldsSlots(a *ActivityExec, now time.Time) bool {
	switch a.State {
	case Queued, Preparing, Running:
		return true
	case CancelledRunning:
		if !a.EndTime.IsZero() {
			return false
		}
		hbt := a.HeartbeatTimeout
		if hbt <= 0 {
			hbt = DefaultHeartbeatTimeout
		}
		return now.Before(a.StateTime.Add(2*hbt + DefaultKillGrace))
	}
	return false
}
