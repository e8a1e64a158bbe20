//go:build linux

package metrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
)

// Endings are followed on Linux only, where the launcher runs (its
// package supervises processes through Linux's process groups).
//
// Endings are counted once across the fleet, however many launchers and
// monitors run, by this rule: an activity attempt's ending is counted by
// the launcher that launched it (its conditional move to QUEUED made it
// the only one), whoever wrote the ending (the wrapper, a monitor's
// timeout, a cancel); a workflow's ending by the launcher that launched
// the attempt that ended last among those that started (latest end time,
// then greatest ID), which every launcher can tell from the workflow's
// items once it has settled. Wrappers live too briefly to be scraped, and
// monitors would each see the same ending; the launcher lives long and
// already knows what it launched. It learns the endings by reading the
// items it launched every DefaultEndingsInterval: a cost that grows with
// what it has running, never with history. docs/metrics.md says what
// this leaves uncounted.

// DefaultEndingsInterval is how often a launcher reads the attempts it
// launched that have not ended.
const DefaultEndingsInterval = 5 * time.Second

// maxTracked bounds the attempts one launcher remembers; beyond it, new
// launches are not followed to their ends (and a log line says so).
const maxTracked = 200_000

// EndingsStore is what following endings reads.
type EndingsStore interface {
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	GetWorkflow(ctx context.Context, workflowExecID string) (*state.WorkflowExec, error)
	Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error)
}

// endings follows what one launcher launched to its end. It is the
// launcher's Observer.
type endings struct {
	m        *Metrics
	st       EndingsStore
	log      hclog.Logger
	interval time.Duration

	mu       sync.Mutex
	pending  map[state.ActivityKey]bool
	last     map[string]*state.ActivityExec // by workflow: our attempt that ended last, its workflow not yet ended
	warnedAt bool
}

var _ launcher.Observer = (*endings)(nil)

func newEndings(m *Metrics, st EndingsStore, log hclog.Logger, interval time.Duration) *endings {
	if interval <= 0 {
		interval = DefaultEndingsInterval
	}
	return &endings{m: m, st: st, log: log, interval: interval,
		pending: map[state.ActivityKey]bool{}, last: map[string]*state.ActivityExec{}}
}

// Launched counts a launch and its latency, and follows the attempt.
func (e *endings) Launched(a *state.ActivityExec, launchType string, waited time.Duration) {
	lt := label(launchType)
	e.m.launches.WithLabelValues(label(monitor.NameOf(a.WorkflowExecID)), lt).Inc()
	e.m.launchLatency.WithLabelValues(lt).Observe(waited.Seconds())
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.pending)+len(e.last) >= maxTracked {
		if !e.warnedAt {
			e.warnedAt = true
			e.log.Warn("following too many launches to their ends; the endings of later ones are not counted", "limit", maxTracked)
		}
		return
	}
	e.pending[a.ActivityKey] = true
	e.m.tracked.Set(float64(len(e.pending) + len(e.last)))
}

// LaunchFailed counts a launch that failed. The attempt's ending is
// counted as any other's if it was launched (an exited wrapper); a launch
// that never happened ends with no duration.
func (e *endings) LaunchFailed(k state.ActivityKey, launchType string, why launcher.LaunchFailure) {
	e.m.launchFailures.WithLabelValues(label(monitor.NameOf(k.WorkflowExecID)), label(launchType), string(why)).Inc()
	if why != launcher.FailedExited {
		name, _, _ := strings.Cut(k.ActivityExecID, "::")
		e.m.activitiesEnded.WithLabelValues(label(monitor.NameOf(k.WorkflowExecID)), label(name), "failed").Inc()
	}
}

// run reads what is pending every interval until ctx ends.
func (e *endings) run(ctx context.Context) {
	t := time.NewTicker(e.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := e.round(ctx); err != nil && ctx.Err() == nil {
			e.log.Debug("following launches to their ends; trying again at the next round", "error", err)
		}
	}
}

// round reads each pending attempt, counts those that ended, then, for
// each workflow with an attempt of ours that ended, counts the workflow's
// ending if it has one and ours is the attempt that ended last.
func (e *endings) round(ctx context.Context) error {
	e.mu.Lock()
	keys := make([]state.ActivityKey, 0, len(e.pending))
	for k := range e.pending {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	for _, k := range keys {
		a, err := e.st.GetActivity(ctx, k)
		switch {
		case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			e.forget(k, nil)
			continue
		case err != nil:
			return err
		case !a.State.Terminal():
			continue
		}
		e.activityEnded(a)
		e.forget(k, a)
	}
	e.mu.Lock()
	last := make([]*state.ActivityExec, 0, len(e.last))
	for _, a := range e.last {
		last = append(last, a)
	}
	e.mu.Unlock()
	for _, a := range last {
		done, err := e.workflowEnded(ctx, a)
		if err != nil {
			return err
		}
		if done {
			e.mu.Lock()
			delete(e.last, a.WorkflowExecID)
			e.m.tracked.Set(float64(len(e.pending) + len(e.last)))
			e.mu.Unlock()
		}
	}
	return nil
}

// forget stops following k; an attempt that ended after it started
// becomes its workflow's candidate for the last one to end.
func (e *endings) forget(k state.ActivityKey, ended *state.ActivityExec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pending, k)
	if ended != nil && !ended.StartTime.IsZero() {
		if cur := e.last[k.WorkflowExecID]; cur == nil || later(ended, cur) {
			e.last[k.WorkflowExecID] = ended
		}
	}
	e.m.tracked.Set(float64(len(e.pending) + len(e.last)))
}

func (e *endings) activityEnded(a *state.ActivityExec) {
	wf, act, outcome := label(monitor.NameOf(a.WorkflowExecID)), label(a.ActivityName), strings.ToLower(string(a.State))
	e.m.activitiesEnded.WithLabelValues(wf, act, outcome).Inc()
	if !a.StartTime.IsZero() && !a.EndTime.IsZero() {
		e.m.activityDuration.WithLabelValues(wf, act, outcome).Observe(max(a.EndTime.Sub(a.StartTime).Seconds(), 0))
	}
}

// workflowEnded counts a's workflow's ending if it has ended and a is the
// attempt that ended last; done says a need not be looked at again.
func (e *endings) workflowEnded(ctx context.Context, a *state.ActivityExec) (done bool, err error) {
	wf, err := e.st.GetWorkflow(ctx, a.WorkflowExecID)
	if errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem) {
		return true, nil
	}
	if err != nil || !wf.State.Terminal() {
		return false, err
	}
	acts, err := e.st.Activities(ctx, a.WorkflowExecID)
	if _, err = state.Skipped(err); err != nil {
		return false, err
	}
	var lastOne *state.ActivityExec
	for _, b := range acts {
		if b.State.Terminal() && !b.StartTime.IsZero() && (lastOne == nil || later(b, lastOne)) {
			lastOne = b
		}
	}
	if lastOne == nil || lastOne.ActivityExecID != a.ActivityExecID {
		return true, nil // another launcher's to count, or nobody's
	}
	name, outcome := label(monitor.NameOf(wf.WorkflowExecID)), strings.ToLower(string(wf.State))
	e.m.workflowsEnded.WithLabelValues(name, outcome).Inc()
	if !wf.StartTime.IsZero() && !wf.EndTime.IsZero() {
		e.m.workflowDuration.WithLabelValues(name, outcome).Observe(max(wf.EndTime.Sub(wf.StartTime).Seconds(), 0))
	}
	return true, nil
}

// later orders ended attempts: by end time, then by ID, so that every
// launcher picks the same one as the last to end.
func later(a, b *state.ActivityExec) bool {
	if !a.EndTime.Equal(b.EndTime) {
		return a.EndTime.After(b.EndTime)
	}
	return a.ActivityExecID > b.ActivityExecID
}

// Launcher returns the observer of a launcher, which counts its launches
// and follows what it launched to its end (see DefaultEndingsInterval),
// reading st from a goroutine that Stop stops; nil on a nil s.
func (s *Server) Launcher(st EndingsStore, interval time.Duration) launcher.Observer {
	if s == nil {
		return nil
	}
	e := newEndings(s.m, st, s.log.Named("endings"), interval)
	s.wg.Add(1)
	go func() { // owned: Stop cancels s.ctx and waits
		defer s.wg.Done()
		e.run(s.ctx)
	}()
	return e
}
