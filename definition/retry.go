package definition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

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

// RetriesOn reports whether the policy's retry_on names the outcome s of
// an attempt: FAILED and TIMED_OUT when it names none. No policy (nil)
// retries nothing.
func (r *Retry) RetriesOn(s state.ActivityState) bool {
	if r == nil {
		return false
	}
	on := r.RetryOn
	if len(on) == 0 {
		on = retryableStates
	}
	return slices.Contains(on, string(s))
}
