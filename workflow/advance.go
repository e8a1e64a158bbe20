// Package workflow holds the contract's moves on top of a state.Store that
// more than one participant makes: advancing a workflow after one of its
// activities ends, and settling a workflow whose activities are all
// terminal. The wrapper calls them when its command ends; the monitor calls
// them again to finish what a crashed wrapper left half-done. Every move is
// a conditional write that is safe to repeat.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// Result says what one Advance changed.
type Result struct {
	Readied   []string            // activity_exec_ids this call moved to READY
	Cancelled []string            // activity_exec_ids this call moved to CANCELLED
	Settled   state.WorkflowState // the state this call settled the workflow in, if it did
}

// pendingStates are the states a dependent can be cancelled from: it has
// not started, because what it waits on has not completed.
var pendingStates = []state.ActivityState{state.Requested, state.Ready, state.Queued, state.Preparing}

// Advance carries the consequences of a terminal activity to the rest of
// its workflow. When it COMPLETED, each activity waiting on it loses that
// edge, and moves REQUESTED → READY once nothing remains. When it ended any
// other way, everything downstream of it that has not started is
// CANCELLED, with the reason. Then, if every activity is terminal, the
// workflow is settled. Each step is a conditional write that a repeat
// finds done, so Advance may be called any number of times, by anyone.
func Advance(ctx context.Context, st state.Store, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	var res Result
	if !a.State.Terminal() {
		return res, fmt.Errorf("advance after %s: it is %s, not terminal", a.ActivityExecID, a.State)
	}
	var err error
	if a.State == state.Completed {
		res.Readied, err = readyDependents(ctx, st, a, log)
	} else {
		res.Cancelled, err = cancelDownstream(ctx, st, a, log)
	}
	if err != nil {
		return res, err
	}
	if len(res.Readied) > 0 {
		return res, nil // something is about to run: the workflow is not done
	}
	res.Settled, err = Settle(ctx, st, a.WorkflowExecID, log)
	return res, err
}

func readyDependents(ctx context.Context, st state.Store, a *state.ActivityExec, log hclog.Logger) ([]string, error) {
	deps, err := st.Dependents(ctx, a.ActivityExecID)
	if err != nil {
		return nil, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
	}
	var readied []string
	for _, d := range deps {
		k := state.ActivityKey{ActivityExecID: d.ActivityExecID, WorkflowExecID: d.WorkflowExecID}
		waiting, _, err := st.ResolveDependency(ctx, k, a.ActivityExecID)
		if err != nil {
			return readied, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
		}
		if len(waiting.PendingDependencies) > 0 || waiting.State != state.Requested {
			continue
		}
		_, err = st.UpdateActivity(ctx, k, state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Ready,
			Reason: "every activity it waits on completed",
		})
		switch {
		case err == nil:
			log.Info("readied a dependent", "dependent", k.ActivityExecID)
			readied = append(readied, k.ActivityExecID)
		case errors.Is(err, state.ErrConflict):
			// Another participant readied (or cancelled) it first.
		default:
			return readied, fmt.Errorf("advance after %s: ready %s: %w", a.ActivityExecID, k.ActivityExecID, err)
		}
	}
	return readied, nil
}

// cancelDownstream cancels, breadth first, every activity that waits on a
// directly or transitively and has not started.
func cancelDownstream(ctx context.Context, st state.Store, a *state.ActivityExec, log hclog.Logger) ([]string, error) {
	var cancelled []string
	type edge struct{ upstream, upstreamState string }
	queue := []edge{{a.ActivityExecID, string(a.State)}}
	seen := map[string]bool{a.ActivityExecID: true}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		deps, err := st.Dependents(ctx, e.upstream)
		if err != nil {
			return cancelled, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
		}
		for _, d := range deps {
			if seen[d.ActivityExecID] {
				continue
			}
			seen[d.ActivityExecID] = true
			k := state.ActivityKey{ActivityExecID: d.ActivityExecID, WorkflowExecID: d.WorkflowExecID}
			reason := fmt.Sprintf("upstream %s ended %s", e.upstream, e.upstreamState)
			_, err := st.UpdateActivity(ctx, k, state.ActivityChange{
				From: pendingStates, To: state.Cancelled, Reason: reason,
			})
			switch {
			case err == nil:
				log.Info("cancelled a dependent", "dependent", k.ActivityExecID, "reason", reason)
				cancelled = append(cancelled, k.ActivityExecID)
			case errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrNotFound):
				// Already cancelled by an earlier or concurrent advance; its
				// own dependents are still walked, so a repeat completes a
				// walk that was cut short.
			default:
				return cancelled, fmt.Errorf("advance after %s: cancel %s: %w", a.ActivityExecID, k.ActivityExecID, err)
			}
			queue = append(queue, edge{d.ActivityExecID, string(state.Cancelled)})
		}
	}
	return cancelled, nil
}

// Settle moves a RUNNING workflow whose activities are all terminal to
// COMPLETED if every one completed, and to FAILED otherwise, naming the
// activities that did not complete. It returns the state it settled the
// workflow in, or "" if the workflow is not done or someone else settled
// it.
func Settle(ctx context.Context, st state.Store, workflowExecID string, log hclog.Logger) (state.WorkflowState, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	acts, err := st.Activities(ctx, workflowExecID)
	if err != nil {
		return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
	}
	var failed []string
	for _, a := range acts {
		if !a.State.Terminal() {
			return "", nil
		}
		if a.State != state.Completed && a.State != state.Cancelled {
			failed = append(failed, fmt.Sprintf("%s %s", a.ActivityName, a.State))
		}
	}
	to, reason := state.WorkflowCompleted, "every activity completed"
	for _, a := range acts {
		if a.State != state.Completed {
			to = state.WorkflowFailed
		}
	}
	if to == state.WorkflowFailed {
		sort.Strings(failed)
		reason = "not every activity completed"
		if len(failed) > 0 {
			reason = strings.Join(failed, ", ")
		}
	}
	_, err = st.UpdateWorkflow(ctx, workflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: to, Reason: reason,
	})
	switch {
	case err == nil:
		log.Info("settled workflow", "workflow_exec_id", workflowExecID, "state", to, "reason", reason)
		return to, nil
	case errors.Is(err, state.ErrConflict):
		return "", nil // settled (or cancelled) by someone else
	}
	return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
}
