package workflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.yaml.in/yaml/v3"

	"github.com/whimbrel/whimbrel/state"
)

// Retry is an activity's retry policy, as Step Functions' Retry and
// Temporal's retry policy have it:
//
//	retry:
//	  max_attempts: 3        # total runs including the first; 1 = no retry (the default)
//	  interval: 10s          # delay before the 2nd attempt
//	  backoff_rate: 2.0      # each later delay is multiplied by this
//	  max_delay: 5m          # cap on any one delay
//	  jitter: full           # full | none (full: uniform in [0, delay])
//	  retry_on: [FAILED, TIMED_OUT]
//	  exit_codes: [1, 75]    # optional: retry FAILED only for these exit codes
//
// A retry is a new activity_exec item for the same activity name, with
// attempt n+1 and the links retry_of / retried_by; the failed item stays
// as it ended (terminal is terminal). Dependents wait for the final
// attempt.
type Retry struct {
	MaxAttempts int      `yaml:"max_attempts,omitempty" json:"max_attempts,omitempty"`
	Interval    Duration `yaml:"interval,omitempty" json:"interval,omitempty"`
	BackoffRate float64  `yaml:"backoff_rate,omitempty" json:"backoff_rate,omitempty"`
	MaxDelay    Duration `yaml:"max_delay,omitempty" json:"max_delay,omitempty"`
	Jitter      string   `yaml:"jitter,omitempty" json:"jitter,omitempty"`
	RetryOn     []string `yaml:"retry_on,omitempty" json:"retry_on,omitempty"`
	ExitCodes   []int    `yaml:"exit_codes,omitempty" json:"exit_codes,omitempty"`
}

// Defaults of Retry, as Step Functions has them.
const (
	DefaultRetryInterval    = time.Second
	DefaultRetryBackoffRate = 2.0
	JitterFull              = "full"
	JitterNone              = "none"
)

var (
	retryKeys = []string{"max_attempts", "interval", "backoff_rate", "max_delay", "jitter", "retry_on", "exit_codes"}
	// retryValueKeys are the retry fields checkValue checks here (interval
	// and max_delay are durations, checked with the others).
	retryValueKeys = []string{"max_attempts", "backoff_rate", "jitter", "retry_on", "exit_codes"}
	// retryableStates are the outcomes retry_on may name.
	retryableStates = []string{string(state.Failed), string(state.TimedOut)}
)

// checkRetryValue checks one retry field where the YAML knows its line.
func checkRetryValue(p *problems, key string, v *yaml.Node, where string) {
	isNull := v.Kind == yaml.ScalarNode && v.Tag == "!!null"
	switch key {
	case "max_attempts":
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || isNull || v.Tag != "!!int" || err != nil {
			p.add(v.Line, "%s: max_attempts must be a whole number, such as 3", where)
		} else if n < 1 {
			p.add(v.Line, "%s: max_attempts %d is less than 1 (1 runs the activity once, with no retry)", where, n)
		}
	case "backoff_rate":
		f, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || isNull || (v.Tag != "!!int" && v.Tag != "!!float") || err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			p.add(v.Line, "%s: backoff_rate must be a number, such as 2.0", where)
		} else if f < 1 {
			p.add(v.Line, "%s: backoff_rate %s is less than 1: delays would shrink", where, v.Value)
		}
	case "jitter":
		if v.Kind != yaml.ScalarNode || isNull || (v.Value != JitterFull && v.Value != JitterNone) {
			p.add(v.Line, "%s: jitter %q is unknown: use full or none", where, v.Value)
		}
	case "retry_on":
		if v.Kind != yaml.SequenceNode {
			p.add(v.Line, "%s: retry_on must be a list, such as [FAILED, TIMED_OUT]", where)
			return
		}
		for _, e := range v.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode || !slices.Contains(retryableStates, e.Value) {
				p.add(e.Line, "%s: retry_on %q is unknown: use FAILED or TIMED_OUT", where, e.Value)
			}
		}
	case "exit_codes":
		if v.Kind != yaml.SequenceNode {
			p.add(v.Line, "%s: exit_codes must be a list of exit statuses, such as [1, 75]", where)
			return
		}
		for _, e := range v.Content {
			e = resolve(e)
			n, err := strconv.Atoi(e.Value)
			if e.Kind != yaml.ScalarNode || e.Tag != "!!int" || err != nil || n < 0 || n > 255 {
				p.add(e.Line, "%s: exit_codes holds %q, not an exit status from 0 to 255", where, e.Value)
			}
		}
	}
}

// check returns the problems of a policy read from JSON (a stored
// definition), where no line is known.
func (r *Retry) check() []string {
	var errs []string
	if r.MaxAttempts < 0 {
		errs = append(errs, fmt.Sprintf("retry: max_attempts %d is less than 1", r.MaxAttempts))
	}
	if r.BackoffRate != 0 && (r.BackoffRate < 1 || math.IsNaN(r.BackoffRate) || math.IsInf(r.BackoffRate, 0)) {
		errs = append(errs, fmt.Sprintf("retry: backoff_rate %v is not a number of at least 1", r.BackoffRate))
	}
	if r.Interval < 0 || r.MaxDelay < 0 {
		errs = append(errs, "retry: interval and max_delay cannot be negative")
	}
	if r.Jitter != "" && r.Jitter != JitterFull && r.Jitter != JitterNone {
		errs = append(errs, fmt.Sprintf("retry: jitter %q is unknown: use full or none", r.Jitter))
	}
	for _, s := range r.RetryOn {
		if !slices.Contains(retryableStates, s) {
			errs = append(errs, fmt.Sprintf("retry: retry_on %q is unknown: use FAILED or TIMED_OUT", s))
		}
	}
	for _, c := range r.ExitCodes {
		if c < 0 || c > 255 {
			errs = append(errs, fmt.Sprintf("retry: exit_codes holds %d, not an exit status from 0 to 255", c))
		}
	}
	return errs
}

// Attempts is how many runs the policy allows in all (1: no retry).
func (r *Retry) Attempts() int {
	if r == nil || r.MaxAttempts < 1 {
		return 1
	}
	return r.MaxAttempts
}

// AttemptOf is which run of its activity an item is: its attempt, or 1
// for a first attempt never claimed.
func AttemptOf(a *state.ActivityExec) int { return max(a.Attempt, 1) }

// Retries reports whether the policy runs the activity again after the
// attempt a, which ended FAILED or TIMED_OUT. The answer depends only on
// the policy and the item, so every participant that asks gets the same
// one: that is what makes the decision to retry one decision.
func (r *Retry) Retries(a *state.ActivityExec) bool {
	if r == nil || AttemptOf(a) >= r.Attempts() {
		return false
	}
	if !a.State.EndedBadly() {
		return false
	}
	on := r.RetryOn
	if len(on) == 0 {
		on = retryableStates
	}
	if !slices.Contains(on, string(a.State)) {
		return false
	}
	if a.State == state.Failed && len(r.ExitCodes) > 0 {
		// A launch that failed has no exit code: not one of the listed.
		return a.ExitCode != nil && slices.Contains(r.ExitCodes, *a.ExitCode)
	}
	return true
}

// Delay is the wait before the attempt after attempt n (n ≥ 1): interval
// × backoff_rate^(n-1), capped at max_delay, and with full jitter a
// uniform draw in [0, that].
func (r *Retry) Delay(n int, draw func() float64) time.Duration {
	interval := time.Duration(r.Interval)
	if interval == 0 {
		interval = DefaultRetryInterval
	}
	rate := r.BackoffRate
	if rate < 1 {
		rate = DefaultRetryBackoffRate
	}
	d := float64(interval) * math.Pow(rate, float64(max(n-1, 0)))
	if limit := float64(r.MaxDelay); limit > 0 && d > limit {
		d = limit
	}
	if d > float64(math.MaxInt64/2) {
		d = float64(math.MaxInt64 / 2)
	}
	if r.Jitter == JitterFull {
		if draw == nil {
			draw = rand.Float64
		}
		d *= draw()
	}
	return time.Duration(d)
}

// policy returns the retry policy of the activity a is an attempt of; nil
// when it has none or the workflow has no definition Whimbrel can read.
func (g graph) policy(a *state.ActivityExec) *Retry {
	if g.def == nil {
		return nil
	}
	eff, err := g.def.Effective(a.ActivityName)
	if err != nil {
		return nil
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
	if !p.Retries(a) {
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
	now := state.Truncate(time.Now())
	delay := p.Delay(n, nil)
	why := fmt.Sprintf("attempt %d of %d ended %s", n, p.Attempts(), a.State)
	if a.ExitCode != nil && a.State == state.Failed {
		why += fmt.Sprintf(" (exit %d)", *a.ExitCode)
	}
	next := &state.ActivityExec{
		ActivityKey:  state.ActivityKey{ActivityExecID: nextID, WorkflowExecID: a.WorkflowExecID},
		WorkflowName: a.WorkflowName, ActivityName: a.ActivityName,
		State: state.Ready, StateTime: now, Attempt: n + 1, RetryOf: a.ActivityExecID,
		NotBefore: now.Add(delay),
		Reason:    fmt.Sprintf("retry: %s; attempt %d may start after %s", why, n+1, delay.Round(time.Millisecond)),
	}
	err := st.CreateActivity(ctx, next)
	switch {
	case err == nil:
		log.Info("retrying an activity", "activity_exec_id", a.ActivityExecID, "next", nextID, "attempt", n+1, "delay", delay)
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
		cur := out[a.ActivityName]
		if cur == nil || AttemptOf(a) > AttemptOf(cur) || (AttemptOf(a) == AttemptOf(cur) && a.RetryOf == cur.ActivityExecID) {
			out[a.ActivityName] = a
		}
	}
	return out
}

// Finals returns the final attempt of each activity among the items of
// one workflow. With a definition, the items of one activity name are the
// attempts of one activity (see Latest). Without one (another client's
// workflow, which has no retries) every item is an activity of its own:
// such a client may give many items one activity_name, or IDs that name
// none, and each is still judged.
func Finals(def *Definition, acts []*state.ActivityExec) map[string]*state.ActivityExec {
	return finals(def != nil, acts)
}

// finals is Finals, told whether the workflow has a definition.
func finals(defined bool, acts []*state.ActivityExec) map[string]*state.ActivityExec {
	out := make(map[string]*state.ActivityExec, len(acts))
	if !defined {
		for _, a := range acts {
			out[a.ActivityExecID] = a
		}
		return out
	}
	for _, a := range Latest(acts) {
		out[a.ActivityExecID] = a
	}
	return out
}

// FinalOf maps the ID of every item of one workflow to the final attempt
// of its activity (see Finals).
func FinalOf(def *Definition, acts []*state.ActivityExec) map[string]*state.ActivityExec {
	out := make(map[string]*state.ActivityExec, len(acts))
	if def == nil {
		for _, a := range acts {
			out[a.ActivityExecID] = a
		}
		return out
	}
	latest := Latest(acts)
	for _, a := range acts {
		out[a.ActivityExecID] = latest[a.ActivityName]
	}
	return out
}

// Pending reports whether a failed attempt still has a retry to come:
// the policy retries it, so the activity is not final yet. Callers that
// judge a workflow (settle, the monitor) use it to wait for the retry.
func Pending(def *Definition, a *state.ActivityExec) bool {
	if def == nil || def.Activities[a.ActivityName] == nil {
		return false
	}
	return def.Effective(a.ActivityName).Retry.Retries(a)
}

// describeAttempt says "attempt n of max" for an activity with a policy.
func describeAttempt(p *Retry, a *state.ActivityExec) string {
	most := p.Attempts()
	if most <= 1 {
		return ""
	}
	return fmt.Sprintf(" after %d of %d attempts", AttemptOf(a), most)
}
