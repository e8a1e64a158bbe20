package wrapper

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// trimAfter is how long the command runs before the wrapper collects its
// garbage as usual again and hands the memory its start left behind back
// to the system.
const trimAfter = time.Second

// startHeapLimit bounds the wrapper's memory while its collector waits
// (DeferGC): past it the collector runs anyway.
const startHeapLimit = 48 << 20

// waitGCPercent is the collector's setting while the wrapper waits on a
// command that has run trimAfter, unless GOGC or GOMEMLIMIT configure it.
// Waiting allocates a little per heartbeat, so collecting four times as
// often as the default costs a fraction of a millisecond a minute, and it
// keeps the heap the wrapper holds near what is live (with the default, a
// waiting wrapper's heap climbs 3 MB above that between collections).
const waitGCPercent = 25

// gcDeferred is set while DeferGC holds the collector back.
var gcDeferred atomic.Bool

// ownProcess is set when TuneRuntime has run: the process is a wrapper's
// own, and its binary's pages are its to unmap (see unmapBinaryPages).
var ownProcess atomic.Bool

// DeferGC holds the garbage collector back for the wrapper's start, up to
// startHeapLimit, unless GOGC or GOMEMLIMIT configure it: a wrapper whose
// command is short (`true`) allocates a few MB in its whole life, and
// collecting them cost it about 3.5 ms of CPU (the collector's workers,
// their threads and its write barriers) of its 24 ms on DynamoDB. Once the
// command has run for trimAfter the collector runs as usual again (see
// trimWhileWaiting). TuneRuntime calls it.
func DeferGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(startHeapLimit)
	debug.SetGCPercent(-1)
	gcDeferred.Store(true)
}

// resumeGC undoes DeferGC, if it held the collector back, with percent
// as the collector's setting, and reports whether it did.
func resumeGC(percent int) bool {
	if gcDeferred.CompareAndSwap(true, false) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(math.MaxInt64)
		return true
	}
	return false
}

// trimWhileWaiting, once the command has run for trimAfter, lets the
// collector run again (at waitGCPercent until the command ends, then as
// usual for recording and advancing), returns to the system the heap the
// wrapper's start used and no longer needs (the store's set-up, the claim,
// the command's data: a few MB the Go runtime would otherwise keep for
// reuse while the wrapper only heartbeats), and, in a wrapper's own
// process, unmaps its binary's pages that the start touched. A command
// that ends sooner costs nothing: the collection that does it takes about
// a millisecond, worth it only for a wrapper that stays. It then tells w
// (when not nil) that the wait has begun, so that each heartbeat gives
// back what it brought in (see waitMem).
func trimWhileWaiting(ctx context.Context, wg *sync.WaitGroup, w *waitMem) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(trimAfter)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			waiting := resumeGC(waitGCPercent)
			debug.FreeOSMemory()
			w.begin() // before the unmapping: it reads runtime/metrics, whose tables are in the binary
			if ownProcess.Load() {
				unmapBinaryPages()
			}
			if waiting {
				<-ctx.Done()
				debug.SetGCPercent(100)
			}
		}
	}()
}

// TuneRuntime sets the Go runtime up for whimbrel-run's life, which is a
// handful of small store writes and waits around a command: DeferGC, the
// binary's pages unmapped once the command has run trimAfter, and
// one processor (GOMAXPROCS=1) unless GOMAXPROCS is set. With one, the
// goroutines that relay signals, heartbeat and copy the command's stderr
// take turns on one thread instead of waking idle ones to look for work:
// that spinning cost about 2 ms of CPU per `true` run on a 2-core machine.
// A blocked system call still hands the processor on, so none of them
// waits on another's call. whimbrel-run calls it first thing in main.
func TuneRuntime() {
	ownProcess.Store(true)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	DeferGC()
}
