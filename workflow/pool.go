package workflow

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// releaseSlots gives back the pool slots an activity that ended held.
// Whoever advances past an activity's end calls it first (the wrapper
// that recorded the end, the launcher that failed a launch, the monitor
// that timed it out or finishes an advance a crashed participant left),
// so the slots are freed by the participants that end an activity, and
// again, harmlessly, by each repeat. Slots of an activity whose wrapper
// may still be stopping its command (CANCELLED_RUNNING without an end
// time) stay held: the lease review frees them once it is over. A
// failure is only logged: the lease review frees what was not released.
func releaseSlots(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) {
	ps, ok := st.(state.PoolStore)
	if !ok || g.def == nil || state.HoldsSlots(a, time.Now()) {
		return
	}
	s, err := g.def.Effective(a.ActivityName)
	if err != nil || s.Pool == "" {
		return
	}
	if err := state.ReleaseSlots(ctx, ps, s.Pool, a.ActivityKey); err != nil {
		log.Warn("releasing pool slots failed; they are freed when their lease lapses", "pool", s.Pool, "activity_exec_id", a.ActivityExecID, "error", err)
		return
	}
	// The waiters parked while the pool was full come back to the READY
	// listing, oldest first, one a free slot; the monitor's sweep does it
	// for a participant that dies here.
	if _, err := state.Refill(ctx, ps, s.Pool); err != nil {
		log.Warn("putting back the parked waiters of a pool failed; the monitor does it", "pool", s.Pool, "error", err)
	}
}
