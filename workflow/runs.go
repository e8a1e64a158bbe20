package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// Run concurrency (docs/pools.md#run-concurrency): a workflow with
// `concurrency: {max_active_runs: N}` runs at most N executions at once.
// The running executions are the holders of a pool of N slots named
// RunPool(name), one slot each, taken by the write that lets a REQUESTED
// execution move to RUNNING and given back once it ended, so the limit
// is kept by the pool's conditional writes, whoever starts or ends runs.
// An execution that finds no slot stays REQUESTED; whoever ends a run of
// the workflow (and the monitor, at every sweep) starts the oldest
// waiting ones.

// RunPool names the pool whose slots are a workflow's running executions.
func RunPool(workflowName string) string { return "runs." + workflowName }

// runHolder is the pool holder that stands for a running execution. Its
// lease does not lapse: the slot is freed by the run's end (see
// freeEndedRuns), never by a launcher's lease review.
func runHolder(wf *state.WorkflowExec, now time.Time) state.PoolHolder {
	return state.PoolHolder{ActivityExecID: "run:" + wf.WorkflowExecID, WorkflowExecID: wf.WorkflowExecID,
		WorkflowName: wf.WorkflowName, Slots: 1, Since: now, LeaseUntil: now.AddDate(100, 0, 0)}
}

// runLister lists executions: every store does.
type runLister interface {
	Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error)
}

// admitRun takes a running slot for the REQUESTED execution wf of d. It
// returns "" when the execution holds one (or d has no limit), and
// otherwise why it waits. An older execution that waits goes first: a
// newer one does not take a slot while one does.
func admitRun(ctx context.Context, st Starter, d *definition.Workflow, wf *state.WorkflowExec) (string, error) {
	n := d.MaxActiveRuns()
	if n == 0 {
		return "", nil
	}
	ps, ok := st.(state.PoolStore)
	if !ok {
		return "", fmt.Errorf("admit %s: the store has no pools, which max_active_runs needs", wf.WorkflowExecID)
	}
	pool := RunPool(d.Name)
	p, shards, err := ps.PoolItems(ctx, pool)
	if err != nil {
		return "", fmt.Errorf("admit %s: %w", wf.WorkflowExecID, err)
	}
	if state.Holds(shards, runHolder(wf, time.Time{}).Key()) {
		return "", nil
	}
	if p == nil || p.Slots != n {
		// The definition sets the size: a changed max_active_runs takes
		// effect at the next start (fewer: no new start until under it).
		if _, err := state.SetPool(ctx, ps, pool, n, "running executions of workflow "+d.Name, state.Truncate(clock.Now())); err != nil {
			return "", fmt.Errorf("admit %s: %w", wf.WorkflowExecID, err)
		}
	}
	if err := freeEndedRuns(ctx, st, ps, pool); err != nil {
		return "", fmt.Errorf("admit %s: %w", wf.WorkflowExecID, err)
	}
	waiting, err := waitingRuns(ctx, st, d.Name)
	if err != nil {
		return "", fmt.Errorf("admit %s: %w", wf.WorkflowExecID, err)
	}
	for _, o := range waiting {
		if o.WorkflowExecID == wf.WorkflowExecID {
			break
		}
		if older(o, wf) {
			return waitReason(ctx, ps, d.Name, n), nil
		}
	}
	err = state.AcquireSlots(ctx, ps, pool, runHolder(wf, state.Truncate(clock.Now())))
	var pw *state.PoolWaitError
	if errors.As(err, &pw) {
		return waitReason(ctx, ps, d.Name, n), nil
	}
	if err != nil {
		return "", fmt.Errorf("admit %s: %w", wf.WorkflowExecID, err)
	}
	return "", nil
}

func older(a, b *state.WorkflowExec) bool {
	if !a.StartTime.Equal(b.StartTime) {
		return a.StartTime.Before(b.StartTime)
	}
	return a.WorkflowExecID < b.WorkflowExecID
}

// waitingRuns lists the REQUESTED executions of a workflow, oldest first.
func waitingRuns(ctx context.Context, st Starter, name string) ([]*state.WorkflowExec, error) {
	l, ok := st.(runLister)
	if !ok {
		return nil, fmt.Errorf("list waiting runs of %s: the store cannot list executions", name)
	}
	wfs, err := l.Workflows(ctx, state.WorkflowQuery{State: state.WorkflowRequested, Name: name})
	if _, err = state.Skipped(err); err != nil {
		return nil, fmt.Errorf("list waiting runs of %s: %w", name, err)
	}
	sort.Slice(wfs, func(i, j int) bool { return older(wfs[i], wfs[j]) })
	return wfs, nil
}

// freeEndedRuns removes the holders whose execution is no longer RUNNING
// (or is gone): what the write that ended it does not free, because its
// writer died before, is freed here.
func freeEndedRuns(ctx context.Context, st Starter, ps state.PoolStore, pool string) error {
	_, shards, err := ps.PoolItems(ctx, pool)
	if err != nil {
		return err
	}
	for _, s := range shards {
		for _, h := range s.Holders {
			wf, err := st.GetWorkflow(ctx, h.WorkflowExecID)
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				return err
			}
			if err == nil && (wf.State == state.WorkflowRunning || wf.State == state.WorkflowRequested) {
				continue
			}
			if err := state.ReleaseSlots(ctx, ps, pool, h.Key()); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitReason says why a run waits, as status shows it.
func waitReason(ctx context.Context, ps state.PoolStore, name string, n int) string {
	_, shards, err := ps.PoolItems(ctx, RunPool(name))
	held := 0
	if err == nil {
		for _, s := range shards {
			held += s.Held()
		}
	}
	return fmt.Sprintf("waiting: %d of max_active_runs %d running", held, n)
}

// RunWaitReason says why a REQUESTED execution waits to run, or "" when
// its workflow has no limit on running executions (or it cannot tell).
func RunWaitReason(ctx context.Context, st any, wf *state.WorkflowExec) string {
	ps, ok := st.(state.PoolStore)
	if !ok || wf == nil || wf.State != state.WorkflowRequested || wf.Definition == "" {
		return ""
	}
	d, err := definition.FromJSON(wf.Definition)
	if err != nil || d.MaxActiveRuns() == 0 {
		return ""
	}
	return waitReason(ctx, ps, d.Name, d.MaxActiveRuns())
}

// StartWaiting starts the oldest REQUESTED executions of the named
// workflow while running slots are free: whoever ends a run calls it, and
// the monitor at every sweep. It returns how many it started.
func StartWaiting(ctx context.Context, st Starter, name string, log hclog.Logger) (int, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	waiting, err := waitingRuns(ctx, st, name)
	if err != nil {
		return 0, err
	}
	started := 0
	for _, listed := range waiting {
		// A listing carries no definition, and may lag: read the item.
		wf, err := st.GetWorkflow(ctx, listed.WorkflowExecID)
		if err != nil {
			return started, fmt.Errorf("start waiting runs of %s: %w", name, err)
		}
		if wf.State != state.WorkflowRequested || wf.Definition == "" {
			continue
		}
		d, err := definition.FromJSON(wf.Definition)
		if err != nil || d.MaxActiveRuns() == 0 {
			continue
		}
		ran, err := begin(ctx, st, d, wf, true)
		if err != nil {
			return started, fmt.Errorf("start waiting runs of %s: %w", name, err)
		}
		if !ran {
			return started, nil // the oldest still waits: so do the rest
		}
		started++
		log.Info("started a run that waited for max_active_runs", "workflow_exec_id", wf.WorkflowExecID)
	}
	return started, nil
}

// runEnded frees the running slot of an execution that ended and starts
// the oldest waiting run in its place. A failure is logged: the next
// start of the workflow, or the monitor, frees the slot and starts it.
func runEnded(ctx context.Context, st any, ended *state.WorkflowExec, log hclog.Logger) {
	if ended == nil || !ended.State.Terminal() {
		return
	}
	s, ok := st.(Starter)
	if !ok {
		return
	}
	if ended.Definition == "" {
		// The write's answer may leave out what it did not change.
		wf, err := s.GetWorkflow(ctx, ended.WorkflowExecID)
		if err != nil || wf.Definition == "" {
			return
		}
		ended = wf
	}
	ps, ok := st.(state.PoolStore)
	if !ok {
		return
	}
	d, err := definition.FromJSON(ended.Definition)
	if err != nil || d.MaxActiveRuns() == 0 {
		return
	}
	if err := state.ReleaseSlots(ctx, ps, RunPool(d.Name), runHolder(ended, time.Time{}).Key()); err != nil {
		log.Warn("freeing a running slot failed; the next start or the monitor frees it", "workflow_exec_id", ended.WorkflowExecID, "error", err)
		return
	}
	if _, err := StartWaiting(ctx, s, d.Name, log); err != nil {
		log.Warn("starting a waiting run failed; the monitor will", "workflow", d.Name, "error", err)
	}
}

// runEndedElsewhere is runEnded for a settle that found the execution
// already ended: by another participant, or by this one's own earlier
// write whose answer was lost. Either may have died before it started
// the waiting run; freeing a freed slot and starting what already started
// do nothing, so the waiting run starts now instead of at the monitor's
// next sweep.
func runEndedElsewhere(ctx context.Context, st any, g graph, log hclog.Logger) {
	if g.def == nil || g.def.MaxActiveRuns() == 0 {
		return
	}
	s, ok := st.(Starter)
	if !ok {
		return
	}
	wf, err := s.GetWorkflow(ctx, g.id)
	if err != nil || !wf.State.Terminal() {
		return
	}
	runEnded(ctx, st, wf, log)
}
