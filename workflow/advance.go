// Package workflow is the contract's moves on a whole workflow: starting
// an execution of a definition (package definition), advancing it after
// one of its activities ends, retrying an activity its policy retries,
// settling it when all are terminal, cancelling it, rerunning or
// redriving it, and waiting for it to settle. The wrapper calls them when
// its command ends; the monitor calls them again to finish what a crashed
// wrapper left half-done. Every move is a conditional write that is safe
// to repeat.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Result says what one Advance changed.
type Result struct {
	Readied   []string            // activity_exec_ids this call moved to READY
	Cancelled []string            // activity_exec_ids this call moved to CANCELLED
	Settled   state.WorkflowState // the state this call settled the workflow in, if it did
	// Retried is the ID of the attempt that retries the activity, when it
	// failed and its retry policy runs it again: then nothing downstream
	// is touched, for the activity is not final.
	Retried string
	// ReadiedMaps is set by AdvanceKnown when some of Readied are for_each
	// maps or their elements: a map readies its elements a page at a
	// time, and Readied names only the map or a page's first element.
	ReadiedMaps bool
}

// pendingStates are the states a dependent can be cancelled from: it has
// not started, because what it waits on has not completed.
var pendingStates = []state.ActivityState{state.Requested, state.Ready, state.Queued, state.Preparing}

// Advance carries the consequences of a terminal activity to the rest of
// its workflow. When it COMPLETED, each activity waiting on it loses that
// edge, and moves REQUESTED → READY once nothing remains. When it ended any
// other way, everything downstream of it that has not started is
// CANCELLED, with the reason. Then, unless a dependent is still waiting, the
// workflow is settled if every activity is terminal. Each step is a
// conditional write that a repeat finds done, so Advance may be called any
// number of times, by anyone.
//
// Dependents come from the definition stored with the workflow (one
// consistent read), or, for a workflow started without one, from the
// dependency index.
func Advance(ctx context.Context, st Advancer, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	var res Result
	if !a.State.Terminal() {
		return res, fmt.Errorf("advance after %s: it is %s, not terminal", a.ActivityExecID, a.State)
	}
	g, err := graphOf(ctx, st, a.WorkflowExecID)
	if err != nil {
		return res, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
	}
	return advance(ctx, st, g, a, log)
}

// AdvanceKnown is Advance for a caller that read the workflow's item
// before (a wrapper, at its claim): the definition stored in wf is used
// as it is, for it never changes, and the item is read again only for a
// decision that needs the workflow's state now (whether to retry). A
// large workflow's item is costly to read, and every wrapper advances.
func AdvanceKnown(ctx context.Context, st Advancer, wf *state.WorkflowExec, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	if wf == nil || wf.WorkflowExecID != a.WorkflowExecID {
		return Advance(ctx, st, a, log)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if !a.State.Terminal() {
		return Result{}, fmt.Errorf("advance after %s: it is %s, not terminal", a.ActivityExecID, a.State)
	}
	g := graphFrom(wf)
	res, err := advance(ctx, st, g, a, log)
	res.ReadiedMaps = g.mapsIn(res.Readied) // readiedmaps.go
	return res, err
}

func advance(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	if a.ItemIndex != nil && g.def != nil {
		return advanceItem(ctx, st, g, a, log) // an element of a for_each map
	}
	var res Result
	var err error
	releaseSlots(ctx, st, g, a, log)
	if a.State != state.Completed {
		if res.Retried, err = retry(ctx, st, g, a, log); err != nil || res.Retried != "" {
			return res, err
		}
	}
	if g.controlled() {
		return advanceControlled(ctx, st, g, a, log) // control.go
	}
	waiting := false
	if a.State == state.Completed {
		res.Readied, waiting, err = readyDependents(ctx, st, g, a, log)
	} else {
		res.Cancelled, err = cancelDownstream(ctx, st, g, a, log)
	}
	if err != nil {
		return res, err
	}
	if len(res.Readied) > 0 || waiting {
		return res, nil // the workflow is not done
	}
	res.Settled, err = settle(ctx, st, g, log)
	return res, err
}

// graph answers which activities wait on which.
type graph struct {
	id  string
	def *definition.Stored // nil for a workflow stored without one
	// state is the workflow's as read when the graph was, or "" when the
	// graph was made from an item read earlier: a decision that needs it
	// reads it then (see running).
	state state.WorkflowState
	// params are the execution's parameters, as stored.
	params string
}

func graphOf(ctx context.Context, st Reader, id string) (graph, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return graph{}, err
	}
	g := graphFrom(wf)
	g.state = wf.State
	return g, nil
}

// graphFrom is the graph of a workflow item read before: its definition
// never changes, its state may have.
func graphFrom(wf *state.WorkflowExec) graph {
	g := graph{id: wf.WorkflowExecID, params: wf.Params}
	if d, err := definition.ReadStored(wf.Definition); err == nil {
		g.def = d
	} // else: stored by another client, in another form; the index serves
	return g
}

// running reports whether the workflow is RUNNING, reading its item when
// the graph was made from one read before.
func (g graph) running(ctx context.Context, st Reader) (bool, error) {
	if g.state != "" {
		return g.state == state.WorkflowRunning, nil
	}
	wf, err := st.GetWorkflow(ctx, g.id)
	if err != nil {
		return false, err
	}
	return wf.State == state.WorkflowRunning, nil
}

// activity returns the definition's entry for the named activity, or nil
// when there is no definition, or no readable entry.
func (g graph) activity(name string) *definition.Activity {
	if g.def == nil {
		return nil
	}
	a, _ := g.def.Activity(name)
	return a
}

// dependents lists the activities that wait on the given one: from the
// definition's entries that name it, or from the dependency index for a
// workflow without a definition or when such an entry cannot be read.
func (g graph) dependents(ctx context.Context, st Advancer, activityExecID string) ([]state.ActivityKey, error) {
	var out []state.ActivityKey
	if g.def != nil {
		name, _, err := state.SplitID(activityExecID)
		if err != nil {
			return nil, err
		}
		if names, err := g.def.Dependents(name); err == nil {
			for _, n := range names {
				out = append(out, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(g.id, n), WorkflowExecID: g.id})
			}
			return out, nil
		}
	}
	deps, err := st.Dependents(ctx, activityExecID)
	// A dependency item that cannot be decoded was reported by the store;
	// the dependents that can be read are advanced all the same.
	if _, err := state.Skipped(err); err != nil {
		return nil, err
	}
	for _, d := range deps {
		out = append(out, state.ActivityKey{ActivityExecID: d.ActivityExecID, WorkflowExecID: d.WorkflowExecID})
	}
	return out, nil
}

// waitsOnOne reports whether the definition has k wait on one activity.
func (g graph) waitsOnOne(k state.ActivityKey) bool {
	name, _, err := state.SplitID(k.ActivityExecID)
	if err != nil {
		return false
	}
	act := g.activity(name)
	return act != nil && len(act.DependsOn) == 1
}

// upstreamsCompleted reports, from the dependency items, whether every
// activity k waits on has completed.
func (g graph) upstreamsCompleted(ctx context.Context, st Advancer, k state.ActivityKey) (bool, error) {
	deps, err := st.Dependencies(ctx, g.id)
	skipped, err := state.Skipped(err)
	if err != nil {
		return false, err
	}
	if len(skipped) > 0 {
		return false, nil // what it waits on cannot all be read: not ready
	}
	for _, d := range deps {
		if d.ActivityExecID != k.ActivityExecID {
			continue
		}
		up, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: d.DependentActivityExecID, WorkflowExecID: g.id})
		if errors.Is(err, state.ErrInvalidItem) {
			return false, nil // an upstream that cannot be read has not completed
		}
		if err != nil {
			return false, err
		}
		if up.State != state.Completed {
			return false, nil
		}
	}
	return true, nil
}

// readyDependents resolves the edge to a from each dependent, readying the
// ones left with nothing pending. waiting reports a dependent that still
// waits on something else.
func readyDependents(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) (readied []string, waiting bool, err error) {
	// Dependents wait on the activity by its first attempt's ID, whichever
	// attempt completed.
	upID := g.rootID(a)
	deps, err := g.dependents(ctx, st, upID)
	if err != nil {
		return nil, false, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
	}
	for _, k := range deps {
		if name, _, err := state.SplitID(k.ActivityExecID); err == nil && g.forEach(name) != nil {
			r, w, err := readyMap(ctx, st, g, k, upID, log)
			if err != nil {
				return readied, waiting, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
			}
			if r {
				readied = append(readied, k.ActivityExecID)
			}
			waiting = waiting || w || !r
			continue
		}
		if g.waitsOnOne(k) {
			// Its only edge: resolve it and ready it in one write.
			_, err := st.UpdateActivity(ctx, k, state.ActivityChange{
				From: []state.ActivityState{state.Requested}, To: state.Ready, Resolve: upID,
				Reason: "every activity it waits on completed",
			})
			if err == nil {
				log.Info("readied a dependent", "dependent", k.ActivityExecID)
				readied = append(readied, k.ActivityExecID)
				continue
			}
			if !errors.Is(err, state.ErrConflict) {
				return readied, waiting, fmt.Errorf("advance after %s: ready %s: %w", a.ActivityExecID, k.ActivityExecID, err)
			}
			// Resolved before (a replay), or moved on: as below.
		}
		dep, _, err := st.ResolveDependency(ctx, k, upID)
		if err != nil {
			return readied, waiting, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
		}
		if dep.State != state.Requested {
			continue
		}
		if len(dep.PendingDependencies) > 0 {
			waiting = true
			continue
		}
		if g.def == nil {
			// Written by another client, which may keep no pending set:
			// ready it only when everything it waits on completed.
			done, err := g.upstreamsCompleted(ctx, st, k)
			if err != nil {
				return readied, waiting, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
			}
			if !done {
				waiting = true
				continue
			}
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
			return readied, waiting, fmt.Errorf("advance after %s: ready %s: %w", a.ActivityExecID, k.ActivityExecID, err)
		}
	}
	return readied, waiting, nil
}

// cancelDownstream cancels, breadth first, every activity that waits on a
// directly or transitively and has not started.
func cancelDownstream(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) ([]string, error) {
	var cancelled []string
	// upstream is the ID dependents know it by (a retried activity's first
	// attempt's); shown, the name of the activity that ended, which is
	// what a person reading the reason knows it by.
	type edge struct{ upstream, shown, upstreamState string }
	queue := []edge{{g.rootID(a), nameOf(a.ActivityExecID, a.ActivityName), string(a.State)}}
	seen := map[string]bool{g.rootID(a): true}
	for len(queue) > 0 {
		e := queue[0]
		queue = queue[1:]
		deps, err := g.dependents(ctx, st, e.upstream)
		if err != nil {
			return cancelled, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
		}
		for _, k := range deps {
			if seen[k.ActivityExecID] {
				continue
			}
			seen[k.ActivityExecID] = true
			reason := fmt.Sprintf("upstream %s ended %s", e.shown, e.upstreamState)
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
			queue = append(queue, edge{k.ActivityExecID, nameOf(k.ActivityExecID, ""), string(state.Cancelled)})
		}
	}
	return cancelled, nil
}

// nameOf is the activity name of an activity execution: name when it is
// known, else the name its ID starts with, else the ID.
func nameOf(activityExecID, name string) string {
	if name != "" {
		return name
	}
	if n, _, err := state.SplitID(activityExecID); err == nil {
		return n
	}
	return activityExecID
}

// Settle moves a RUNNING workflow whose activities are all terminal to
// COMPLETED if every one completed, and to FAILED otherwise, naming the
// activities that did not complete. It returns the state it settled the
// workflow in, or "" if the workflow is not done or someone else settled
// it.
func Settle(ctx context.Context, st Settler, workflowExecID string, log hclog.Logger) (state.WorkflowState, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	g, err := graphOf(ctx, st, workflowExecID)
	if err != nil {
		return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
	}
	return settle(ctx, st, g, log)
}

func settle(ctx context.Context, st Settler, g graph, log hclog.Logger) (state.WorkflowState, error) {
	workflowExecID := g.id
	if knownLive(ctx, workflowExecID) { // knownlive.go
		return "", nil
	}
	if live, err := probeLive(ctx, st, g); err != nil || live { // liveprobe.go
		return "", err
	}
	if live, err := surelyLive(ctx, st, workflowExecID); err != nil || live {
		return "", err
	}
	if g.controlled() {
		return settleControlled(ctx, st, g, log) // outcome.go
	}
	acts, err := st.Activities(ctx, workflowExecID)
	skipped, err := state.Skipped(err)
	if err != nil {
		return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
	}
	if len(skipped) > 0 {
		// An activity that cannot be read cannot be judged terminal: the
		// workflow stays unsettled until the item is fixed or deleted.
		log.Warn("not settling a workflow with activities that cannot be decoded", "workflow_exec_id", workflowExecID, "undecodable", len(skipped))
		return "", nil
	}
	for _, a := range acts {
		if !a.State.Terminal() {
			return "", nil
		}
	}
	// An activity is judged by its latest attempt: the earlier ones
	// failed, or timed out, and were retried. Another client's workflow
	// has no retries: each of its items is judged, whatever its name.
	final := Finals(g.def != nil, acts)
	var latest []*state.ActivityExec
	for _, a := range acts {
		if final[a.ActivityExecID] == a {
			latest = append(latest, a)
		}
	}
	if g.def != nil && len(latest) < g.def.Len() {
		// The listing goes through an index that has not caught up: do
		// not judge the workflow on part of it.
		return "", nil
	}
	var failed []string
	for _, a := range latest {
		if retries(g.policy(a), a) {
			// Its retry is still to be made: whoever recorded the failure
			// died before deciding it. Decide it now; the workflow is not
			// done.
			next, err := retry(ctx, st, g, a, log)
			if err != nil {
				return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
			}
			if next != "" {
				return "", nil
			}
		}
		if a.State != state.Completed && a.State != state.Cancelled {
			failed = append(failed, fmt.Sprintf("%s %s%s", a.ActivityName, a.State, describeAttempt(g.policy(a), a)))
		}
	}
	to, reason := state.WorkflowCompleted, "every activity completed"
	for _, a := range latest {
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
	settled, err := st.UpdateWorkflow(ctx, workflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: to, Reason: reason,
	})
	switch {
	case err == nil:
		log.Info("settled workflow", "workflow_exec_id", workflowExecID, "state", to, "reason", reason)
		expire(ctx, st, g, settled, log)
		notifyEnding(ctx, st, g.def, settled, acts, log)
		finishAfterSettle(ctx, st, settled, log)
		return to, nil
	case errors.Is(err, state.ErrConflict):
		notifyLost(ctx, st, g.def, workflowExecID, acts, log)
		runEndedElsewhere(ctx, st, g, log)
		return "", nil // settled (or cancelled) by someone else
	}
	return "", fmt.Errorf("settle %s: %w", workflowExecID, err)
}

// expire marks a settled execution's items for deletion after the
// definition's retention. A failure is logged: the outcome stands, and the
// items are merely kept.
func expire(ctx context.Context, st Canceller, g graph, wf *state.WorkflowExec, log hclog.Logger) {
	if g.def == nil || g.def.Retention() <= 0 || wf == nil {
		return
	}
	end := wf.EndTime
	if end.IsZero() {
		end = time.Now()
	}
	if err := st.Expire(ctx, wf.WorkflowExecID, end.Add(time.Duration(g.def.Retention()))); err != nil {
		log.Warn("marking the execution's items to expire failed; they are kept", "workflow_exec_id", wf.WorkflowExecID, "error", err)
	}
}
