//go:build whimbrel_fault

package clock

import (
	"fmt"
	"os"
	"sync"
	"time"
)

var offset = sync.OnceValue(func() time.Duration {
	v := os.Getenv(Env)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clock: %s=%q is not a duration; the clock is not offset\n", Env, v)
		return 0
	}
	return d
})

// Now is time.Now moved by WHIMBREL_FAULT_CLOCK_OFFSET. The monotonic
// reading goes with it, so durations between two readings stay exact.
func Now() time.Time { return time.Now().Add(offset()) }
