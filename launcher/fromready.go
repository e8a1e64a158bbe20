package launcher

import (
	"context"
	"errors"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// ReadyClaimer is a Backend that, for some jobs, supervises the activity
// in the launcher's own process and has its supervisor claim it straight
// from READY to RUNNING, which the contract lets an actor that runs the
// activity at once do (docs/contract.md#transitions). The launcher then
// makes no claim of its own to QUEUED: one conditional write instead of
// two per activity.
//
// For a job with FromReady set, Launch returns only once the supervisor's
// claim is decided: nil when it landed (the activity is RUNNING under the
// supervisor), ErrNotClaimed when it did not (another launcher claimed
// the activity first, the workflow no longer runs, or the store could not
// be used; the supervisor logged why and wrote nothing that it did not
// also finish), and another error when nothing was started.
type ReadyClaimer interface {
	ClaimsFromReady(j Job) bool
}

// ErrNotClaimed is what a ReadyClaimer's Launch returns when its
// supervisor's claim from READY did not land.
var ErrNotClaimed = errors.New("the activity was not claimed")

// claimsFromReady reports whether b claims j from READY itself.
func claimsFromReady(b Backend, j Job) bool {
	rc, ok := b.(ReadyClaimer)
	return ok && rc.ClaimsFromReady(j)
}

// fromReady decides whether the try of a, an activity of the workflow w,
// leaves the claim to the backend (tryFromReady). An activity of a pool
// does not: its slot is taken with the launcher's claim to QUEUED and its
// accounting (pool.go) goes through that state.
func (l *Launcher) fromReady(a *state.ActivityExec, w *passWorkflow, act *definition.Activity, s definition.Settings, backend Backend) (Job, bool) {
	if act == nil || s.Pool != "" || backend == nil {
		return Job{}, false
	}
	job := l.job(a, w.def, act, s)
	job.Workflow = w.item
	job.FromReady = true
	return job, claimsFromReady(backend, job)
}

// tryFromReady launches job, whose backend claims the activity a from
// READY to RUNNING itself. The try lasts until that claim is decided, so
// that the launcher does not try the activity again while its claim is in
// flight, and a refused claim frees its slot at once. A launch that
// fails before the claim leaves the activity READY; it is then claimed to
// QUEUED and failed, as any launch the backend could not make.
func (l *Launcher) tryFromReady(ctx context.Context, a *state.ActivityExec, job Job, backend Backend) (bool, error) {
	log := l.log.With("activity_exec_id", a.ActivityExecID)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.cfg.CallTimeout, fromReadyTimeout))
	launchedAs, err := backend.Launch(lctx, job)
	cancel()
	switch {
	case errors.Is(err, ErrNotClaimed):
		return false, nil
	case err != nil:
		log.Warn("launch failed", "error", err)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		claimed, cerr := l.claim(cctx, a.ActivityKey)
		cancel()
		if claimed == nil || cerr != nil {
			return false, cerr
		}
		return false, l.fail(ctx, claimed, job.Settings.Launch.Type, FailedBackend, err)
	}
	log.Info("launched", "as", launchedAs, "type", job.Settings.Launch.Type)
	if l.cfg.Observer != nil {
		l.cfg.Observer.Launched(a, job.Settings.Launch.Type, waitedSince(a, time.Now()))
	}
	return true, nil
}

// fromReadyTimeout bounds the wait for a backend's claim from READY: the
// claim retries a store that does not answer for up to a minute.
const fromReadyTimeout = 2 * time.Minute
