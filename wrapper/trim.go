package wrapper

import (
	"context"
	"runtime/debug"
	"sync"
	"time"
)

// trimAfter is how long the command runs before the wrapper hands the
// memory its start left behind back to the system.
const trimAfter = time.Second

// trimWhileWaiting returns to the system, once the command has run for
// trimAfter, the heap the wrapper's start used and no longer needs (the
// store's set-up, the claim, the command's data: a few MB the Go runtime
// would otherwise keep for reuse while the wrapper only heartbeats). A
// command that ends sooner costs nothing: the collection that does it
// takes about a millisecond, worth it only for a wrapper that stays.
func trimWhileWaiting(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(trimAfter)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			debug.FreeOSMemory()
		}
	}()
}
