package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// AttemptOf is which run of its activity an item is: its attempt, or 1
// for a first attempt never claimed.
func AttemptOf(a *state.ActivityExec) int { return max(a.Attempt, 1) }

// retries reports whether the policy p runs the activity again after the
// attempt a, which ended FAILED or TIMED_OUT. The answer depends only on
// the policy and the item, so every participant that asks gets the same
// one: that is what makes the decision to retry one decision.
func retries(p *definition.Retry, a *state.ActivityExec) bool {
	if p == nil || AttemptOf(a) >= p.Attempts() {
		return false
	}
	if !a.State.EndedBadly() {
		return false
	}
	if !p.RetriesOn(a.State) {
		return false
	}
	if a.State == state.Failed && len(p.ExitCodes) > 0 {
		// A launch that failed has no exit code: not one of the listed.
		return a.ExitCode != nil && slices.Contains(p.ExitCodes, *a.ExitCode)
	}
	return true
}

// policy returns the retry policy of the activity a is an attempt of; nil
// when it has none or the workflow has no definition Whimbrel can read.
func (g graph) policy(a *state.ActivityExec) *definition.Retry {
	if g.def == nil {
		return nil
	}
	eff, err := g.def.Effective(a.ActivityName)
	if err != nil || g.isMap(a) {
		return nil // a map is not retried: its elements are
	}
	return eff.Retry
}

// rootID is the ID dependents know the activity of a by: its first
// attempt's, which their pending sets and dependency items name. Only a
// workflow with a definition has retries, and its first attempts have
// derived IDs.
func (g graph) rootID(a *state.ActivityExec) string {
	if g.def == nil || a.RetryOf == "" {
		return a.ActivityExecID
	}
	return state.ActivityExecIDFor(g.id, a.ActivityName)
}

// retry makes sure the attempt after a exists, when the policy retries a
// and the workflow still runs: it creates the next attempt (one
// conditional create of an item whose ID derives from a's, so however
// many participants decide it, one item is written), then links a to it.
// It returns the next attempt's ID, or "" when a is final.
func retry(ctx context.Context, st Settler, g graph, a *state.ActivityExec, log hclog.Logger) (string, error) {
	p := g.policy(a)
	if !retries(p, a) {
		return "", nil
	}
	if running, err := g.running(ctx, st); err != nil || !running {
		if err != nil {
			err = fmt.Errorf("retry %s: read the workflow: %w", a.ActivityExecID, err)
		}
		return "", err
	}
	n := AttemptOf(a)
	nextID := state.RetryIDFor(a.ActivityExecID)
	now := state.Truncate(clock.Now())
	delay := p.Delay(n, nil)
	why := fmt.Sprintf("attempt %d of %d ended %s", n, p.Attempts(), a.State)
	if a.ExitCode != nil && a.State == state.Failed {
		why += fmt.Sprintf(" (exit %d)", *a.ExitCode)
	}
	next := &state.ActivityExec{
		ActivityKey:  state.ActivityKey{ActivityExecID: nextID, WorkflowExecID: a.WorkflowExecID},
		WorkflowName: a.WorkflowName, ActivityName: a.ActivityName,
		State: state.Ready, StateTime: now, Attempt: n + 1, RetryOf: a.ActivityExecID,
		NotBefore: now.Add(delay), ItemIndex: a.ItemIndex, Item: a.Item,
		Reason: fmt.Sprintf("retry: %s; attempt %d may start after %s", why, n+1, delay.Round(time.Millisecond)),
	}
	err := st.CreateActivity(ctx, next)
	switch {
	case err == nil:
		aboutActivity(log, a.ActivityExecID).Info("retrying an activity", "next", nextID, "attempt", n+1, "delay", delay)
	case errors.Is(err, state.ErrConflict):
		// Decided before, by this participant or another.
	default:
		return "", fmt.Errorf("retry %s: %w", a.ActivityExecID, err)
	}
	if a.RetriedBy != nextID {
		_, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{a.State}, RetriedBy: nextID,
		})
		if err != nil && !errors.Is(err, state.ErrConflict) {
			return "", fmt.Errorf("retry %s: link to %s: %w", a.ActivityExecID, nextID, err)
		}
	}
	return nextID, nil
}

// Latest returns, by activity name, the latest attempt among the items of
// one workflow: the one with the highest attempt (on a tie, the one that
// retries the other).
func Latest(acts []*state.ActivityExec) map[string]*state.ActivityExec {
	out := map[string]*state.ActivityExec{}
	for _, a := range acts {
		if a.ItemIndex != nil {
			continue // an element of a map: the map's item stands for them
		}
		cur := out[a.ActivityName]
		if cur == nil || AttemptOf(a) > AttemptOf(cur) || (AttemptOf(a) == AttemptOf(cur) && a.RetryOf == cur.ActivityExecID) {
			out[a.ActivityName] = a
		}
	}
	return out
}

// Finals maps the ID of every item of one workflow to the final attempt
// of its activity; an item is final when it maps to itself. With a
// definition (defined), the items of one activity name are the attempts of
// one activity, and the final one is the latest (see Latest). Without one
// (another client's workflow, which has no retries) every item is an
// activity of its own, and final: such a client may give many items one
// activity_name, or IDs that name none, and each is still judged. The
// elements of a for_each map map to nothing: the map's own item stands
// for them.
func Finals(defined bool, acts []*state.ActivityExec) map[string]*state.ActivityExec {
	out := make(map[string]*state.ActivityExec, len(acts))
	if !defined {
		for _, a := range acts {
			out[a.ActivityExecID] = a
		}
		return out
	}
	latest := Latest(acts)
	for _, a := range acts {
		if a.ItemIndex != nil {
			continue // an element of a map: the map's item is judged for it
		}
		out[a.ActivityExecID] = latest[a.ActivityName]
	}
	return out
}

// RetryPending reports whether a failed attempt still has a retry to come:
// the policy retries it, so the activity is not final yet. Callers that
// judge a workflow (settle, the monitor) use it to wait for the retry.
func RetryPending(def *definition.Workflow, a *state.ActivityExec) bool {
	if def == nil || def.Activities[a.ActivityName] == nil {
		return false
	}
	if a.ItemIndex == nil && def.Activities[a.ActivityName].ForEach != nil {
		return false // a map is not retried: its elements are
	}
	return retries(def.Effective(a.ActivityName).Retry, a)
}

// describeAttempt says "attempt n of max" for an activity with a policy.
func describeAttempt(p *definition.Retry, a *state.ActivityExec) string {
	most := p.Attempts()
	if most <= 1 {
		return ""
	}
	return fmt.Sprintf(" after %d of %d attempts", AttemptOf(a), most)
}

// aboutActivity is log with the activity named, unless log names it
// already (the wrapper's logger does): hclog would write the pair twice.
func aboutActivity(log hclog.Logger, activityExecID string) hclog.Logger {
	implied := log.ImpliedArgs()
	for i := 0; i+1 < len(implied); i += 2 {
		if implied[i] == "activity_exec_id" && implied[i+1] == activityExecID {
			return log
		}
	}
	return log.With("activity_exec_id", activityExecID)
}
