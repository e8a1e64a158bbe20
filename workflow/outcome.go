package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// The outcome of a workflow with control flow (docs/control-flow.md): once
// every activity is final, FAILED if one failed that no one_failed,
// all_failed or all_done dependent handled, else COMPLETED. Without
// finally activities, one write settles the workflow in it. With them,
// one write records it as the workflow's outcome while the workflow stays
// RUNNING, the finally activities are created, and the write that settles
// the workflow (in the recorded outcome, whatever they did) comes once
// they are all final, naming those that did not complete.

// settleControlled is settle for a workflow with control flow.
func settleControlled(ctx context.Context, st Settler, g graph, log hclog.Logger) (state.WorkflowState, error) {
	wf, err := st.GetWorkflow(ctx, g.id)
	if err != nil {
		return "", fmt.Errorf("settle %s: %w", g.id, err)
	}
	if wf.State != state.WorkflowRunning {
		return "", nil
	}
	acts, err := st.Activities(ctx, g.id)
	skipped, err := state.Skipped(err)
	if err != nil {
		return "", fmt.Errorf("settle %s: %w", g.id, err)
	}
	if len(skipped) > 0 {
		log.Warn("not settling a workflow with activities that cannot be decoded", "workflow_exec_id", g.id, "undecodable", len(skipped))
		return "", nil
	}
	latest := Latest(acts)
	for _, n := range g.def.Names() {
		l := latest[n]
		if l == nil || !l.State.Terminal() {
			return "", nil // not done, or an index that has not caught up
		}
		if retries(g.policy(l), l) {
			next, err := retry(ctx, st, g, l, log)
			if err != nil || next != "" {
				return "", err
			}
		}
	}
	fin := g.def.FinallyNames()
	if wf.Outcome == "" {
		to, by, reason := judge(g, latest)
		c := state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: to, Reason: reason, DecidedBy: by}
		if len(fin) > 0 {
			c.To, c.Outcome = "", to
			c.Reason = fmt.Sprintf("%s; running its finally activities", reason)
		}
		got, err := st.UpdateWorkflow(ctx, g.id, c)
		switch {
		case err == nil && len(fin) == 0:
			log.Info("settled workflow", "workflow_exec_id", g.id, "state", to, "reason", reason)
			expire(ctx, st, g, got, log)
			notifyEnding(ctx, st, g.def, got, acts, log)
			finishAfterSettle(ctx, st, got, log)
			return to, nil
		case err == nil:
			log.Info("workflow's outcome decided; running its finally activities", "workflow_exec_id", g.id, "outcome", to, "reason", reason)
			wf = got
		case errors.Is(err, state.ErrConflict):
			// Decided by someone else: go on from what they recorded.
			if wf, err = st.GetWorkflow(ctx, g.id); err != nil {
				return "", fmt.Errorf("settle %s: %w", g.id, err)
			}
			if wf.State.Terminal() {
				// Settled, perhaps by this very write whose reply was
				// lost: its notifications are written where absent.
				notifyEnding(ctx, st, g.def, wf, acts, log)
			}
			if wf.State != state.WorkflowRunning || wf.Outcome == "" {
				return "", nil
			}
		default:
			return "", fmt.Errorf("settle %s: %w", g.id, err)
		}
	}
	if len(fin) == 0 {
		return "", nil
	}
	created, err := ensureFinally(ctx, st, g, fin, latest)
	if err != nil || created {
		return "", err
	}
	var failed []string
	for _, n := range fin {
		l := latest[n]
		if !l.State.Terminal() {
			return "", nil
		}
		if retries(g.policy(l), l) {
			next, err := retry(ctx, st, g, l, log)
			if err != nil || next != "" {
				return "", err
			}
		}
		if l.State != state.Completed {
			failed = append(failed, fmt.Sprintf("%s %s", n, l.State))
		}
	}
	got, err := st.UpdateWorkflow(ctx, g.id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: wf.Outcome,
		Reason:        strings.TrimSuffix(wf.Reason, "; running its finally activities"),
		FinallyFailed: strings.Join(failed, ", "),
	})
	switch {
	case err == nil:
		log.Info("settled workflow", "workflow_exec_id", g.id, "state", wf.Outcome, "finally_failed", strings.Join(failed, ", "))
		expire(ctx, st, g, got, log)
		notifyEnding(ctx, st, g.def, got, acts, log)
		finishAfterSettle(ctx, st, got, log)
		return wf.Outcome, nil
	case errors.Is(err, state.ErrConflict):
		notifyLost(ctx, st, g.def, g.id, acts, log)
		return "", nil
	}
	return "", fmt.Errorf("settle %s: %w", g.id, err)
}

// judge decides the outcome of a workflow whose activities are all final,
// the activity that decided it, and why.
func judge(g graph, latest map[string]*state.ActivityExec) (to state.WorkflowState, by, reason string) {
	var unhandled, handled []string
	var handler string
	for _, n := range g.def.Names() {
		l := latest[n]
		if l == nil || !l.State.EndedBadly() {
			continue
		}
		by := ""
		deps, _ := g.def.Dependents(n)
		for _, d := range deps {
			act := g.activity(d)
			if dl := latest[d]; act != nil && act.Handles() && dl != nil && dl.State != state.Cancelled {
				by = d
				break
			}
		}
		what := fmt.Sprintf("%s %s%s", n, l.State, describeAttempt(g.policy(l), l))
		if by == "" {
			unhandled = append(unhandled, what)
		} else {
			handled = append(handled, what+" (handled by "+by+")")
			if handler == "" || by < handler {
				handler = by
			}
		}
	}
	sort.Strings(unhandled)
	sort.Strings(handled)
	if len(unhandled) > 0 {
		first, _, _ := strings.Cut(unhandled[0], " ")
		return state.WorkflowFailed, first, strings.Join(unhandled, ", ")
	}
	if len(handled) > 0 {
		return state.WorkflowCompleted, handler, "every failure was handled: " + strings.Join(handled, ", ")
	}
	return state.WorkflowCompleted, "", "every activity completed or was skipped"
}

// ensureFinally creates the finally activities that are not yet created,
// each waiting on the finally activities it depends on, and readies those
// that wait on nothing. created reports that one was missing.
func ensureFinally(ctx context.Context, st Settler, g graph, fin []string, latest map[string]*state.ActivityExec) (bool, error) {
	name, err := state.WorkflowNameOf(g.id)
	if err != nil {
		return false, err
	}
	created := false
	now := state.Truncate(clock.Now())
	for _, n := range fin {
		if latest[n] != nil {
			continue
		}
		created = true
		act := g.activity(n)
		a := &state.ActivityExec{
			ActivityKey:  state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(g.id, n), WorkflowExecID: g.id},
			WorkflowName: name, ActivityName: n, State: state.Requested, StateTime: now, Attempt: 1,
		}
		if act != nil {
			for _, up := range act.DependsOn {
				a.PendingDependencies = append(a.PendingDependencies, state.ActivityExecIDFor(g.id, up))
			}
		}
		if err := st.CreateActivity(ctx, a); err != nil && !errors.Is(err, state.ErrConflict) {
			return created, fmt.Errorf("create finally activity %s: %w", n, err)
		}
		if len(a.PendingDependencies) > 0 {
			continue
		}
		if adv, ok := st.(Advancer); ok && act != nil && act.When != "" {
			// Its when decides it, as any activity's.
			got, err := decide(ctx, adv, g, a, hclog.NewNullLogger())
			if err == nil && got != nil && got.State.Terminal() {
				_, err = advance(ctx, adv, g, got, hclog.NewNullLogger())
			}
			if err != nil {
				return created, fmt.Errorf("decide finally activity %s: %w", n, err)
			}
			continue
		}
		_, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: "the workflow's outcome is known",
		})
		if err != nil && !errors.Is(err, state.ErrConflict) {
			return created, fmt.Errorf("ready finally activity %s: %w", n, err)
		}
	}
	return created, nil
}

// FinallyInputs are what a finally activity is handed: the state the
// workflow's activities decided, and the names of those that failed or
// timed out.
func FinallyInputs(ctx context.Context, st Reader, wf *state.WorkflowExec) (outcome state.WorkflowState, failed []string, err error) {
	acts, err := st.Activities(ctx, wf.WorkflowExecID)
	if _, err := state.Skipped(err); err != nil {
		return "", nil, err
	}
	d, _ := definition.ReadStored(wf.Definition)
	for n, l := range Latest(acts) {
		if d != nil && d.IsFinally(n) {
			continue
		}
		if l.State.EndedBadly() {
			failed = append(failed, n)
		}
	}
	sort.Strings(failed)
	return wf.Outcome, failed, nil
}
