package monitor

import (
	"context"
	"strconv"
	"sync"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// mapsSeen remembers each running for_each map's progress (its account
// and how many elements its shards count) as a sweep saw it: a map that
// has not moved since the last sweep may have been left half-stepped by a
// participant that died.
type mapsSeen struct {
	mu   sync.Mutex
	seen map[string]string // activity_exec_id → map account
}

// stalled records acc as the map's account and reports whether the last
// sweep saw the same, and whether the map's pages were repaired since
// (see repaired): a map whose elements run long is stepped at every sweep,
// which is cheap, and read through only once while it does not move.
func (ms *mapsSeen) stalled(id, acc string) (stalled, pagesDone bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.seen == nil {
		ms.seen = map[string]string{}
	}
	switch ms.seen[id] {
	case acc + repaired:
		return true, true
	case acc:
		return true, false
	}
	ms.seen[id] = acc
	return false, false
}

// repairedPages records that the map's pages were repaired at acc.
func (ms *mapsSeen) repairedPages(id, acc string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.seen[id] == acc {
		ms.seen[id] = acc + repaired
	}
}

// repaired marks an account whose pages the monitor has repaired.
const repaired = "\x00repaired"

// forget drops what is remembered of a map that ended.
func (ms *mapsSeen) forget(id string) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.seen, id)
}

// isMap reports whether a is the item of a for_each map (not one of its
// elements).
func isMap(def *definition.Workflow, a *state.ActivityExec) bool {
	act := def.Activities[a.ActivityName]
	return a.ItemIndex == nil && act != nil && act.ForEach != nil
}

// repairMaps finishes what participants that died left of the workflow's
// maps: a map whose upstreams completed but that was never opened, or
// half-opened, and a running map, which it steps (the participant that
// recorded an element's end may have died before its step), writing the
// missing elements of its pages when its account did not move since the
// last sweep (a step may have died between the account and the page it
// announced). A step is conditional and repeatable, so a repair that
// races a live participant changes nothing twice.
func (s *sweep) repairMaps(ctx context.Context, def *definition.Workflow, acts []*state.ActivityExec) error {
	for _, a := range acts {
		if !isMap(def, a) {
			continue
		}
		switch {
		case a.State == state.Requested && len(a.PendingDependencies) == 0:
		case a.State == state.Queued && a.Owner == state.MapOwner:
		case a.State == state.Running && a.Map != "":
			// A step is cheap (the map's item, its shards and the element
			// at the front of its list), so every sweep takes one: a
			// monitor killed between two sweeps still moves a map on. The
			// pages are read through only when neither the account nor
			// the shards' count moved.
			counted, err := workflow.CountedElements(ctx, s.st, a)
			if err != nil {
				return err
			}
			progress := a.Map + "\x00" + strconv.Itoa(counted)
			stalled, pagesDone := s.maps.stalled(a.ActivityExecID, progress)
			res, err := workflow.StepMap(ctx, s.st, a, stalled && !pagesDone, s.log.Named("advance"))
			if err != nil {
				return err
			}
			if stalled {
				s.maps.repairedPages(a.ActivityExecID, progress)
			}
			if len(res.Readied) > 0 || res.Settled != "" {
				s.report.Repaired++
				s.log.Info("stepped a for_each map a participant left", "activity_exec_id", a.ActivityExecID)
			}
			continue
		default:
			s.maps.forget(a.ActivityExecID)
			continue
		}
		if s.now.Sub(a.StateTime) < s.cfg.AdvanceGrace && a.State != state.Running {
			continue // its opener is likely still at it
		}
		res, err := workflow.StepMap(ctx, s.st, a, false, s.log.Named("advance"))
		if err != nil {
			return err
		}
		if len(res.Readied) > 0 || res.Settled != "" {
			s.report.Repaired++
			s.log.Info("stepped a for_each map a participant left", "activity_exec_id", a.ActivityExecID)
		}
	}
	return nil
}
