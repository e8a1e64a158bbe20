package definition_test

import (
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// TestRetryDelay: the delays grow by the rate, stop at max_delay, and
// full jitter draws within [0, delay].
func TestRetryDelay(t *testing.T) {
	t.Parallel()
	r := &definition.Retry{MaxAttempts: 10, Interval: definition.Duration(time.Second), BackoffRate: 2, MaxDelay: definition.Duration(5 * time.Second)}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 9: 5 * time.Second} {
		if got := r.Delay(n, nil); got != want {
			t.Errorf("delay after attempt %d: %s, want %s", n, got, want)
		}
	}
	r.Jitter = definition.JitterFull
	if got := r.Delay(3, func() float64 { return 0.5 }); got != 2*time.Second {
		t.Errorf("full jitter at 0.5 of 4s: %s", got)
	}
	for i := 0; i < 100; i++ {
		if got := r.Delay(3, nil); got < 0 || got > 4*time.Second {
			t.Fatalf("full jitter drew %s, outside [0, 4s]", got)
		}
	}
	if got := (&definition.Retry{MaxAttempts: 99, Interval: definition.Duration(time.Hour), BackoffRate: 10}).Delay(90, nil); got <= 0 {
		t.Errorf("a huge delay overflowed to %s", got)
	}
	var none *definition.Retry
	if none.Attempts() != 1 || none.RetriesOn(state.Failed) {
		t.Error("no policy retries")
	}
}

// TestParseRetry: the fields read per activity and under defaults, an
// activity's own policy replacing the defaults'; every mistake is reported
// at once, each with its line and path, before anything is written.
func TestParseRetry(t *testing.T) {
	t.Parallel()
	d, err := definition.Parse("ok.yaml", []byte(`name: r
defaults:
  retry: {max_attempts: 3, interval: 10s, backoff_rate: 2.0, max_delay: 5m, jitter: full, retry_on: [FAILED, TIMED_OUT], exit_codes: [1, 75]}
activities:
  a: {command: ["true"]}
  b: {command: ["true"], retry: {max_attempts: 5}}
  c: {command: ["true"], retry: {max_attempts: 1}}
`))
	if err != nil {
		t.Fatal(err)
	}
	a := d.Effective("a").Retry
	if a.Attempts() != 3 || time.Duration(a.Interval) != 10*time.Second || a.BackoffRate != 2 || time.Duration(a.MaxDelay) != 5*time.Minute ||
		a.Jitter != "full" || len(a.RetryOn) != 2 || len(a.ExitCodes) != 2 || a.ExitCodes[1] != 75 {
		t.Errorf("a: %+v", a)
	}
	if b := d.Effective("b").Retry; b.Attempts() != 5 || b.Interval != 0 {
		t.Errorf("b: %+v, want its own policy as a whole", b)
	}
	if c := d.Effective("c").Retry; c.Attempts() != 1 {
		t.Errorf("c: %+v", c)
	}
	// The stored form reads back the same.
	again, err := definition.FromJSON(d.JSON())
	if err != nil || again.Effective("a").Retry.Attempts() != 3 || again.Effective("a").Retry.ExitCodes[1] != 75 {
		t.Errorf("stored: %v", err)
	}

	_, err = definition.Parse("bad.yaml", []byte(`name: r
defaults:
  retry:
    max_attempts: 0
    interval: soon
activities:
  a:
    command: ["true"]
    retry:
      backoff_rate: 0.5
      retry_on: [FAILED, CANCELLED]
      jitter: some
      max_delay: -1s
      exit_codes: [1, 300]
      max_attempt: 3
`))
	if err == nil {
		t.Fatal("bad.yaml parsed")
	}
	for _, want := range []string{
		"bad.yaml:4: defaults: retry: max_attempts 0 is less than 1",
		`bad.yaml:5: defaults: retry: interval "soon" is not a duration`,
		`bad.yaml:10: activity "a": retry: backoff_rate 0.5 is less than 1`,
		`bad.yaml:11: activity "a": retry: retry_on "CANCELLED" is unknown`,
		`bad.yaml:12: activity "a": retry: jitter "some" is unknown`,
		`bad.yaml:13: activity "a": retry: max_delay "-1s" is negative`,
		`bad.yaml:14: activity "a": retry: exit_codes holds "300"`,
		`bad.yaml:15: activity "a": retry: unknown field "max_attempt" (did you mean "max_attempts"?)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the errors lack %q:\n%v", want, err)
		}
	}
	// A stored definition written by another client is checked too.
	if _, err := definition.FromJSON(`{"name":"r","activities":{"a":{"command":["true"],"retry":{"backoff_rate":0.5,"retry_on":["NOPE"]}}}}`); err == nil ||
		!strings.Contains(err.Error(), "backoff_rate") || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("stored definition with a bad policy: %v", err)
	}
}
