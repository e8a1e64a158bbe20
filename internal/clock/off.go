//go:build !whimbrel_fault

package clock

import "time"

// Now is time.Now in release builds.
func Now() time.Time { return time.Now() }
