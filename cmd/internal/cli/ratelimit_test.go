package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestRateLimit: the same warning repeated within the period is held back
// and counted; a different one goes through at once.
func TestRateLimit(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	w := RateLimit(&out, 10*time.Second).(*rateLimited)
	w.now = func() time.Time { return now }
	log := hclog.New(&hclog.LoggerOptions{Name: "whimbrel", Output: w, Level: hclog.Warn})
	for i := 0; i < 5; i++ {
		log.Warn("reading the workflow failed", "error", "timeout", "attempt", i)
		now = now.Add(time.Second)
	}
	log.Warn("claim failed", "error", "timeout")
	now = now.Add(10 * time.Second)
	log.Warn("reading the workflow failed", "error", "timeout", "attempt", 99)

	got := out.String()
	if n := strings.Count(got, "reading the workflow failed"); n != 2 {
		t.Errorf("the repeated warning shown %d times, want 2:\n%s", n, got)
	}
	if !strings.Contains(got, "claim failed") {
		t.Errorf("a different warning was held back:\n%s", got)
	}
	if !strings.Contains(got, "(4 more like the line above") {
		t.Errorf("the held-back count is missing:\n%s", got)
	}
}
