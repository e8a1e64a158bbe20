package wrapper

import (
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// freeEvery is the most time between two hand-backs of the heap to the
// system after heartbeats (see waitMem.landed), when no collection is near
// sooner. Each one is a forced collection and the heap's free pages
// returned, to be faulted back in as the next beats allocate: about 3 ms
// of CPU for a wrapper that beats every 15 s, as much as the beat itself,
// for a few hundred kB that the runtime returns in the background anyway.
// Once a minute bounds what is held between collections at little cost.
const freeEvery = time.Minute

// waitMem gives back, after each heartbeat that lands while the wrapper
// waits on its command, the memory the beat brought in that waiting does
// not need: the binary's pages the beat's path through the store's client
// touched, mapped back from the page cache at the next beat, and the heap
// the beats left behind. Without it a waiting wrapper holds, from its
// first beats on, every page of its binary that a beat or a collection
// ever touched (the kernel maps 64 KB around each) and the heap the
// collector keeps for reuse: about 15 MB on DynamoDB instead of about 6.
//
// The collections that waiting needs are moved between beats where it
// can: a collection scans every goroutine's stack, reading the binary's
// function tables (several MB of pages), and one that falls in a beat
// holds those pages and the beat's at once. So after a beat whose
// allocations, were the next beat to repeat them, could start one, the
// wrapper collects itself, with the beat's pages already unmapped, and
// unmaps again after it.
type waitMem struct {
	// waiting is set once the command has run trimAfter and the wrapper
	// has given back what its start used (trimWhileWaiting): a command
	// that ends sooner pays nothing per beat.
	waiting atomic.Bool
	// unmap is whether the binary's pages are this process's to unmap
	// (ownProcess when the wait began).
	unmap atomic.Bool
	// Only the pump's goroutine, which calls landed, uses the rest once
	// waiting is set.
	freed  time.Time        // when the heap was last handed back
	allocs uint64           // bytes allocated in the process's life at the last beat
	heap   []metrics.Sample // read at each beat
}

// The heap's figures landed reads, in the order of waitMem.heap.
var waitMetrics = []string{"/gc/heap/allocs:bytes", "/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes", "/gc/heap/goal:bytes"}

// begin marks the wait as begun: trimWhileWaiting calls it once it has
// given back what the start used.
func (w *waitMem) begin() {
	if w == nil {
		return
	}
	w.freed = time.Now()
	w.heap = make([]metrics.Sample, len(waitMetrics))
	for i, name := range waitMetrics {
		w.heap[i].Name = name
	}
	metrics.Read(w.heap)
	w.allocs = w.heap[0].Value.Uint64()
	w.unmap.Store(ownProcess.Load())
	w.waiting.Store(true)
}

// landed is the heartbeat pump's Landed hook: a beat has landed.
func (w *waitMem) landed(time.Time) {
	if w == nil || !w.waiting.Load() {
		return
	}
	metrics.Read(w.heap)
	allocs, objects, live, goal := w.heap[0].Value.Uint64(), w.heap[1].Value.Uint64(), w.heap[2].Value.Uint64(), w.heap[3].Value.Uint64()
	perBeat := allocs - w.allocs
	w.allocs = allocs
	if w.unmap.Load() {
		unmapBinaryPages()
	}
	now := time.Now()
	if now.Sub(w.freed) < freeEvery && !collectionNear(objects, live, goal, perBeat) {
		return
	}
	w.freed = now
	debug.FreeOSMemory()
	metrics.Read(w.heap[:1])
	w.allocs = w.heap[0].Value.Uint64()
	if w.unmap.Load() {
		unmapBinaryPages()
	}
}

// collectionNear reports whether two more beats that each allocate
// perBeat bytes could start a collection: the heap holds objects bytes
// (live and not yet swept), the last collection left live, and the
// collector aims at goal. The runtime starts a collection at 70–95% of
// the way from live to goal, but counts as used the whole of each span it
// holds cached for a size of object, which objects does not: with the
// little a waiting wrapper holds, that is a third of the way or more
// (with half, gctrace still showed collections starting in beats). So
// this counts from a third of the way.
func collectionNear(objects, live, goal, perBeat uint64) bool {
	if goal <= live {
		return true
	}
	return objects+2*perBeat >= live+(goal-live)/3
}
