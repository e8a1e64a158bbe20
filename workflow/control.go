package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Control flow (docs/control-flow.md): a workflow whose definition has a
// when, a trigger rule or finally activities advances here. An activity
// is decided once every upstream is final: its rule met or not (CANCELLED
// with the reason), then its when true (READY) or false (SKIPPED: moved
// through QUEUED and RUNNING to COMPLETED with skipped, by the engine, so
// a client of the base contract sees a finished activity). Each decision
// is a conditional write any participant may make and repeat.

// skipOwner holds an activity the engine moves without running it: the
// token of its QUEUED and RUNNING moves, which the monitor recognises to
// finish a skip that its decider left half-way.
const skipOwner = "whimbrel:skip"

// ruleReason starts the reason of an activity cancelled because its
// trigger rule cannot be met.
const ruleReason = "trigger_rule "

// RuleCancelled reports whether a CANCELLED activity was cancelled
// because its trigger rule could not be met, rather than because an
// upstream did not complete or an operator cancelled it.
func RuleCancelled(a *state.ActivityExec) bool {
	return a.State == state.Cancelled && strings.HasPrefix(a.Reason, ruleReason)
}

// Shown is the state a view shows for an activity: SKIPPED for a skipped
// one, else its state.
func Shown(a *state.ActivityExec) string {
	if a.Skipped && (a.State == state.Completed || a.State == state.Running || a.State == state.Queued) {
		return "SKIPPED"
	}
	return string(a.State)
}

func (g graph) controlled() bool { return g.def != nil && g.def.Controlled() }

// advanceControlled is Advance for a workflow with control flow: every
// ending of a resolves its edge to each dependent, and a dependent left
// with nothing pending is decided. What a decision ends (a skip, a
// cancellation) is advanced past in turn.
func advanceControlled(ctx context.Context, st Advancer, g graph, a *state.ActivityExec, log hclog.Logger) (Result, error) {
	var res Result
	waiting := false
	queue := []*state.ActivityExec{a}
	for len(queue) > 0 {
		up := queue[0]
		queue = queue[1:]
		upID := g.rootID(up)
		deps, err := g.dependents(ctx, st, upID)
		if err != nil {
			return res, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
		}
		for _, k := range deps {
			dep, _, err := st.ResolveDependency(ctx, k, upID)
			if errors.Is(err, state.ErrNotFound) {
				continue // a finally activity not created yet
			}
			if err != nil {
				return res, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
			}
			if dep.State != state.Requested {
				continue
			}
			if len(dep.PendingDependencies) > 0 {
				waiting = true
				continue
			}
			got, err := decide(ctx, st, g, dep, log)
			if err != nil {
				return res, fmt.Errorf("advance after %s: %w", a.ActivityExecID, err)
			}
			switch {
			case got == nil:
				waiting = true
			case got.State == state.Ready && got.Reason == readiedHere:
				res.Readied = append(res.Readied, got.ActivityExecID)
			case got.State == state.Ready:
				// Readied by another participant: theirs to report.
			case got.State == state.Cancelled:
				res.Cancelled = append(res.Cancelled, got.ActivityExecID)
				queue = append(queue, got)
			case got.State.Terminal():
				queue = append(queue, got)
			}
		}
	}
	if len(res.Readied) > 0 || waiting {
		return res, nil
	}
	var err error
	res.Settled, err = settle(ctx, st, g, log)
	return res, err
}

// Decide decides an activity of a workflow with control flow that waits
// on nothing more: the monitor calls it for one whose decider died. It
// returns the activity as decided, or nil when it cannot be decided yet.
func Decide(ctx context.Context, st Advancer, a *state.ActivityExec, log hclog.Logger) (*state.ActivityExec, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	g, err := graphOf(ctx, st, a.WorkflowExecID)
	if err != nil {
		return nil, fmt.Errorf("decide %s: %w", a.ActivityExecID, err)
	}
	got, err := decide(ctx, st, g, a, log)
	if err != nil || got == nil || !got.State.Terminal() {
		return got, err
	}
	_, err = advance(ctx, st, g, got, log)
	return got, err
}

// decide judges a REQUESTED activity with nothing pending: its trigger
// rule against its upstreams' endings, then its when. It returns the
// activity as it now stands, or nil when an upstream is not final yet.
func decide(ctx context.Context, st Advancer, g graph, k *state.ActivityExec, log hclog.Logger) (*state.ActivityExec, error) {
	if k.State != state.Requested {
		return k, nil
	}
	if k.Skipped {
		return finishSkip(ctx, st, k, log)
	}
	act := g.activity(k.ActivityName)
	if act == nil {
		return nil, nil // no readable entry: leave it to the repair
	}
	ups := map[string]*state.ActivityExec{}
	for _, name := range act.DependsOn {
		u, err := latestOf(ctx, st, g.id, name)
		if err != nil {
			return nil, err
		}
		if u == nil || !u.State.Terminal() || retries(g.policy(u), u) {
			return nil, nil // not final yet: the last upstream's advance decides
		}
		ups[name] = u
	}
	if met, why := ruleMet(act, ups); !met {
		got, err := st.UpdateActivity(ctx, k.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Cancelled, Reason: why,
		})
		if err != nil {
			return conflicted(ctx, st, k, err)
		}
		log.Info("cancelled a dependent", "dependent", k.ActivityExecID, "reason", why)
		return got, nil
	}
	if act.When != "" && !(g.isMap(k) && act.WhenPerElement()) { // per element: the wrapper's
		env, err := whenEnv(ctx, st, g, ups)
		if err != nil {
			return nil, err
		}
		ok, werr := definition.EvalWhen(act.When, env)
		switch {
		case werr != nil:
			return failWhen(ctx, st, k, werr, log)
		case !ok:
			return skip(ctx, st, k, fmt.Sprintf("skipped: when %q is false", act.When), log)
		}
	}
	if g.isMap(k) {
		return openDecided(ctx, st, g, k, log) // foreach_when.go
	}
	got, err := st.UpdateActivity(ctx, k.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: readyReason(act),
	})
	if err != nil {
		return conflicted(ctx, st, k, err)
	}
	log.Info("readied a dependent", "dependent", k.ActivityExecID)
	mine := *got
	mine.Reason = readiedHere
	return &mine, nil
}

// readiedHere marks, in what decide returns (never in the store), an
// activity this call readied, as against one another participant did.
const readiedHere = "\x00readied here"

func readyReason(act *definition.Activity) string {
	switch {
	case len(act.DependsOn) == 0:
		return "it waits on nothing"
	case act.Rule() != definition.RuleAllSuccess:
		return "trigger_rule " + act.Rule() + " met"
	}
	return "every activity it waits on completed"
}

// conflicted reads what another participant made of an activity whose
// decision it took first.
func conflicted(ctx context.Context, st Advancer, k *state.ActivityExec, err error) (*state.ActivityExec, error) {
	if !errors.Is(err, state.ErrConflict) {
		return nil, fmt.Errorf("decide %s: %w", k.ActivityExecID, err)
	}
	got, err := st.GetActivity(ctx, k.ActivityKey)
	if err != nil {
		return nil, fmt.Errorf("decide %s: %w", k.ActivityExecID, err)
	}
	if got.Skipped && !got.State.Terminal() {
		return finishSkip(ctx, st, got, hclog.NewNullLogger())
	}
	return got, nil
}

// latestOf reads the latest attempt of a named activity with consistent
// reads only: its first attempt, then each retry it links to.
func latestOf(ctx context.Context, st Advancer, workflowExecID, name string) (*state.ActivityExec, error) {
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(workflowExecID, name), WorkflowExecID: workflowExecID}
	for range 1000 {
		a, err := st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if a.RetriedBy == "" {
			return a, nil
		}
		k.ActivityExecID = a.RetriedBy
	}
	return nil, fmt.Errorf("read %s: its retries do not end", name)
}

// ruleMet judges an activity's trigger rule against its upstreams, all
// final, and says why when it is not met.
func ruleMet(act *definition.Activity, ups map[string]*state.ActivityExec) (bool, string) {
	var completed, skipped, failed, cancelled []string
	for name, u := range ups {
		switch {
		case u.State == state.Completed && u.Skipped:
			skipped = append(skipped, name)
		case u.State == state.Completed:
			completed = append(completed, name)
		case u.State.EndedBadly():
			failed = append(failed, name)
		default:
			cancelled = append(cancelled, name)
		}
	}
	for _, l := range [][]string{completed, skipped, failed, cancelled} {
		sort.Strings(l)
	}
	n := len(ups)
	rule := act.Rule()
	var met bool
	switch rule {
	case definition.RuleAllSuccess:
		met = len(completed)+len(skipped) == n
	case definition.RuleAllDone:
		met = true
	case definition.RuleAllFailed:
		met = len(failed)+len(cancelled) == n
	case definition.RuleOneFailed:
		met = len(failed) > 0 || n == 0
	case definition.RuleOneSuccess:
		met = len(completed) > 0 || n == 0
	case definition.RuleNoneFailed:
		met = len(failed)+len(cancelled) == 0
	}
	if met {
		return true, ""
	}
	if rule == definition.RuleAllSuccess {
		// As without control flow: named after the first upstream that
		// did not complete.
		var bad []string
		for name, u := range ups {
			if u.State != state.Completed {
				bad = append(bad, fmt.Sprintf("upstream %s ended %s", name, u.State))
			}
		}
		sort.Strings(bad)
		return false, strings.Join(bad, ", ")
	}
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"completed", completed}, {"skipped", skipped}, {"failed", failed}, {"cancelled", cancelled}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+": "+strings.Join(p.names, ", "))
		}
	}
	return false, fmt.Sprintf("%s%s not met (%s)", ruleReason, rule, strings.Join(parts, "; "))
}

// whenEnv is what an activity's when reads: the execution's parameters,
// its direct upstreams' outputs (none from a skipped one), the workflow's
// name and ID, and no item (a map's activity passes its own).
func whenEnv(ctx context.Context, st Advancer, g graph, ups map[string]*state.ActivityExec) (definition.WhenEnv, error) {
	wf, err := st.GetWorkflow(ctx, g.id)
	if err != nil {
		return definition.WhenEnv{}, err
	}
	params, err := definition.StoredParams(wf.Params)
	if err != nil {
		return definition.WhenEnv{}, err
	}
	env := definition.WhenEnv{Params: params, Outputs: map[string]any{},
		Workflow: map[string]string{"name": wf.WorkflowName, "id": wf.WorkflowExecID}}
	for name, u := range ups {
		if u.State != state.Completed || u.Skipped || u.Output == "" {
			continue
		}
		var v any
		if json.Unmarshal([]byte(u.Output), &v) == nil {
			env.Outputs[name] = v
		}
	}
	return env, nil
}

// skip moves an activity whose when is false to COMPLETED with skipped,
// through the contract's moves: REQUESTED → QUEUED → RUNNING →
// COMPLETED, each held by skipOwner. The first write is the decision;
// whoever finds it half-way finishes it (finishSkip).
func skip(ctx context.Context, st Advancer, k *state.ActivityExec, reason string, log hclog.Logger) (*state.ActivityExec, error) {
	got, err := st.UpdateActivity(ctx, k.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued, Hold: skipOwner, Skipped: true, Reason: reason,
	})
	if err != nil {
		return conflicted(ctx, st, k, err)
	}
	log.Info("skipping an activity", "activity_exec_id", k.ActivityExecID, "reason", reason)
	return finishSkip(ctx, st, got, log)
}

// SkipHeld reports whether an activity is one the engine is skipping: the
// monitor finishes it (FinishSkip) instead of judging its launch.
func SkipHeld(a *state.ActivityExec) bool {
	return a.Skipped && a.Owner == skipOwner && (a.State == state.Queued || a.State == state.Running)
}

// FinishSkip finishes a skip that its decider left half-way, then
// advances past it.
func FinishSkip(ctx context.Context, st Advancer, a *state.ActivityExec, log hclog.Logger) error {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	got, err := finishSkip(ctx, st, a, log)
	if err != nil || got == nil || got.State != state.Completed {
		return err
	}
	_, err = Advance(ctx, st, got, log)
	return err
}

func finishSkip(ctx context.Context, st Advancer, a *state.ActivityExec, log hclog.Logger) (*state.ActivityExec, error) {
	reason := a.Reason
	for range 3 {
		var c state.ActivityChange
		switch a.State {
		case state.Queued:
			c = state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: skipOwner}}
		case state.Running:
			c = state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: skipOwner, Skipped: true, Reason: reason}
		default:
			return a, nil
		}
		got, err := st.UpdateActivity(ctx, a.ActivityKey, c)
		if errors.Is(err, state.ErrConflict) {
			if got, err = st.GetActivity(ctx, a.ActivityKey); err != nil {
				return nil, fmt.Errorf("skip %s: %w", a.ActivityExecID, err)
			}
		} else if err != nil {
			return nil, fmt.Errorf("skip %s: %w", a.ActivityExecID, err)
		}
		a = got
	}
	if a.State == state.Completed {
		log.Info("skipped an activity", "activity_exec_id", a.ActivityExecID)
	}
	return a, nil
}

// failWhen fails an activity whose when could not be evaluated, through
// QUEUED (the only way from REQUESTED to FAILED), with the reason naming
// the expression. A participant that dies between the two leaves a
// QUEUED activity the monitor fails when it has waited too long.
func failWhen(ctx context.Context, st Advancer, k *state.ActivityExec, werr error, log hclog.Logger) (*state.ActivityExec, error) {
	reason := werr.Error()
	_, err := st.UpdateActivity(ctx, k.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued, Hold: "whimbrel:when", Reason: reason,
	})
	if err != nil && !errors.Is(err, state.ErrConflict) {
		return nil, fmt.Errorf("fail %s: %w", k.ActivityExecID, err)
	}
	got, err := st.UpdateActivity(ctx, k.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Failed, Owner: "whimbrel:when", Reason: reason, Error: reason,
	})
	if err != nil {
		return conflicted(ctx, st, k, err)
	}
	log.Warn("failed an activity whose when could not be evaluated", "activity_exec_id", k.ActivityExecID, "error", reason)
	return got, nil
}
