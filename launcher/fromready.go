package launcher

import (
	"context"
	"errors"
	"strings"
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
// be used, and then with state.ErrUnavailable wrapped in it as well; the
// supervisor logged why and wrote nothing that it did not also finish),
// and another error when nothing was started.
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
	case errors.Is(err, ErrNotClaimed) && errors.Is(err, state.ErrUnavailable):
		return false, err // the pass hands out no more (Launcher.passOf)
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

// tryUnread is try for a listed or handed activity that a backend claims
// from READY, without reading its item first: the claim's conditional
// write from READY is the check the read would make, and what the launch
// needs of the item follows from its key. That holds for an activity's
// first attempt, whose key is derived from its workflow's and its name
// (state.ActivityExecIDFor): it is READY or it is not, with no delay
// (only a retry's item has one) and no attempt yet. tried is false when
// the activity is not one of those (a retry, a map's element or the map
// itself, a child workflow's activity, one of a pool, or one no backend
// here claims from READY): try then reads the item first.
func (l *Launcher) tryUnread(ctx context.Context, p *pass, ref state.ActivityRef) (launched, tried bool, err error) {
	k := ref.ActivityKey
	name, _, ok := strings.Cut(k.ActivityExecID, "::")
	if !ok || state.ActivityExecIDFor(k.WorkflowExecID, name) != k.ActivityExecID {
		return false, false, nil
	}
	w, err := l.workflow(ctx, p, k.WorkflowExecID)
	if err != nil || w.state != state.WorkflowRunning || w.def == nil {
		return false, false, nil // try reads the item and judges it (the workflow's read is the pass's, made once)
	}
	act := w.def.Lookup(name)
	if act == nil || act.IsChild() || act.ForEach != nil {
		return false, false, nil
	}
	settings := w.def.Effective(name)
	a := &state.ActivityExec{ActivityKey: k, ActivityName: name, State: state.Ready, StateTime: ref.StateTime}
	job, ok := l.fromReady(a, w, act, settings, l.cfg.Backends[settings.Launch.Type])
	if !ok {
		return false, false, nil
	}
	l.pools.mark(k.ActivityExecID)
	if ctx.Err() != nil {
		return false, true, nil // stopping: claim nothing more
	}
	launched, err = l.tryFromReady(ctx, a, job, l.cfg.Backends[settings.Launch.Type])
	return launched, true, err
}
