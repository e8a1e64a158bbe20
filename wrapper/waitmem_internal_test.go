package wrapper

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestCollectionNear: a collection is near when two more beats like the
// last could bring the heap a third of the way from what the last
// collection left to the collector's goal.
func TestCollectionNear(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		objects, live, goal, perBeat uint64
		want                         bool
	}{
		{objects: 12 * mb / 10, live: 1 * mb, goal: 2 * mb, perBeat: 50 << 10, want: false},
		{objects: 13 * mb / 10, live: 1 * mb, goal: 2 * mb, perBeat: 50 << 10, want: true},
		{objects: 1 * mb, live: 1 * mb, goal: 2 * mb, perBeat: 400 << 10, want: true},
		{objects: 1 * mb, live: 1 * mb, goal: 1 * mb, perBeat: 0, want: true},
		{objects: 3 * mb, live: 1 * mb, goal: math.MaxUint64, perBeat: mb, want: false}, // GOGC=off
	} {
		if got := collectionNear(c.objects, c.live, c.goal, c.perBeat); got != c.want {
			t.Errorf("collectionNear(objects %d, live %d, goal %d, per beat %d) = %v; want %v", c.objects, c.live, c.goal, c.perBeat, got, c.want)
		}
	}
}

// forcedGCs is how many collections the process was asked for.
func forcedGCs() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapFree is the heap the runtime holds free and has not returned.
func heapFree() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink [][]byte

// TestLandedHandsTheHeapBack: a beat before the wait has begun changes
// nothing; once it has, a beat collects and returns the free heap to the
// system when freeEvery has passed since the last time or when the heap
// is near a collection, and otherwise not. Not parallel: the collector's
// setting is the process's.
func TestLandedHandsTheHeapBack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // a wide runway: no collection starts on its own here
	var w waitMem
	w.landed(time.Now())
	w.begin()
	for i := 0; i < 64; i++ {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC()
	metrics.Read(w.heap[:1])
	w.allocs = w.heap[0].Value.Uint64() // as if the last beat had landed here
	forced, free := forcedGCs(), heapFree()
	if free < 16<<20 {
		t.Fatalf("only %d bytes of the heap free after dropping 64 MB; the test needs more", free)
	}
	w.landed(time.Now())
	if got := forcedGCs(); got != forced {
		t.Errorf("a beat %s after the wait began, with no collection near, forced %d collections; want none", time.Since(w.freed), got-forced)
	}

	w.freed = time.Now().Add(-freeEvery)
	w.landed(time.Now())
	if got, after := forcedGCs(), heapFree(); got != forced+1 || after > free/4 {
		t.Errorf("a beat %s after the last hand-back: %d forced collections and %d bytes of the heap kept free (of %d); want one, and under a quarter of it",
			freeEvery, got-forced, after, free)
	}

	// A beat that allocated a quarter of the runway to the collector's
	// goal: the next one could start a collection in it, so this one
	// collects.
	runtime.GC()
	w.landed(time.Now()) // counts the allocations from here
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	live, goal, cycles := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	forced = forcedGCs()
	for n := uint64(0); n < (goal-live)/4; n += 64 << 10 {
		sink = append(sink, make([]byte, 64<<10))
	}
	metrics.Read(s)
	if s[2].Value.Uint64() != cycles {
		t.Fatalf("a collection started on its own while the test filled a quarter of the runway (live %d, goal %d)", live, goal)
	}
	w.landed(time.Now())
	sink = nil
	if got := forcedGCs(); got != forced+1 {
		t.Errorf("a beat that allocated a quarter of the way from %d live bytes to the goal of %d forced %d collections; want one", live, goal, got-forced)
	}
}
