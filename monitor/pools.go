package monitor

import (
	"context"
	"errors"
	"fmt"

	"github.com/whimbrel/whimbrel/state"
)

// parked sweeps the waiters parked in the pools' queues (state.PoolQueue),
// which the READY listing leaves out: each is judged as a READY activity
// (one of a workflow that ended is cancelled), and each pool with parked
// waiters is refilled, its lapsed leases reviewed first, so that a waiter
// is let in even when the participant that freed its slots died before
// putting it back. Every other pool has the slots of ended activities
// freed (freeEnded).
func (s *sweep) parked(ctx context.Context) error {
	ps, ok := s.st.(state.PoolStore)
	q, queue := s.st.(state.PoolQueue)
	if !ok || !queue {
		return nil
	}
	pools, err := ps.ListPools(ctx)
	if _, err = state.Skipped(err); err != nil {
		return fmt.Errorf("list pools: %w", err)
	}
	for _, p := range pools {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		refs, err := q.Parked(ctx, p.Name, 0)
		if _, err = state.Skipped(err); err != nil {
			if errors.Is(err, state.ErrUnavailable) {
				return err
			}
			s.log.Warn("could not list a pool's parked waiters", "pool", p.Name, "error", err)
			continue
		}
		if len(refs) == 0 {
			s.freeEnded(ctx, ps, p.Name)
			continue
		}
		// They are READY: the metrics count them with the others.
		for _, ref := range refs {
			if s.cfg.Workflow != "" && ref.WorkflowExecID != s.cfg.Workflow {
				continue
			}
			name := NameOf(ref.WorkflowExecID)
			s.seen.Activities[NameState{name, string(state.Ready)}]++
			s.seen.OldestReady[name] = max(s.seen.OldestReady[name], s.now.Sub(ref.StateTime))
		}
		for _, ref := range refs {
			if !s.scope.Has(ctx, s.st, ref.WorkflowExecID) {
				continue
			}
			if err := s.judge(ctx, ref.ActivityKey, state.Ready); err != nil {
				if errors.Is(err, state.ErrUnavailable) {
					return err
				}
				s.log.Warn("could not judge an activity", "activity_exec_id", ref.ActivityExecID, "error", err)
			}
		}
		_, shards, err := ps.PoolItems(ctx, p.Name)
		if err != nil {
			s.log.Warn("could not read a pool", "pool", p.Name, "error", err)
			continue
		}
		if n, err := state.ReviewLeases(ctx, ps, s.st, p.Name, shards, s.now); err != nil {
			s.log.Warn("reviewing a pool's leases failed", "pool", p.Name, "error", err)
		} else if n > 0 {
			s.log.Info("freed pool slots whose activity no longer runs", "pool", p.Name, "freed", n)
		}
		if _, err := state.Refill(ctx, ps, p.Name); err != nil {
			s.log.Warn("putting back a pool's parked waiters failed", "pool", p.Name, "error", err)
		}
	}
	return nil
}

// freeEnded frees the slots of a pool's holders whose leases lapsed and
// whose activities no longer hold slots: a release that failed as its
// activity ended (the store unusable past its retries) would otherwise
// stay held, in a pool nobody waits for, until a launcher needs the room,
// and the pool would show a slot held by an activity that ended. It
// renews no lease (state.FreeEnded), and the activities this sweep listed
// queued, preparing or running are not read: a pool costs its one read
// of its items, and a write only when a slot is freed.
func (s *sweep) freeEnded(ctx context.Context, ps state.PoolStore, pool string) {
	_, shards, err := ps.PoolItems(ctx, pool)
	if err != nil {
		s.log.Warn("could not read a pool", "pool", pool, "error", err)
		return
	}
	live := func(k state.ActivityKey) bool { return s.live[k] }
	if n, err := state.FreeEnded(ctx, ps, s.st, pool, shards, s.now, live); err != nil {
		s.log.Warn("freeing a pool's slots of ended activities failed", "pool", pool, "error", err)
	} else if n > 0 {
		s.log.Info("freed pool slots whose activity no longer runs", "pool", pool, "freed", n)
	}
}
