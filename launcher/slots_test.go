package launcher

import (
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

func key(n string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: "wf::1::" + n, WorkflowExecID: "wf::1"}
}

// mustTake takes k and fails unless the answer is want.
func mustTake(t *testing.T, s *slots, k state.ActivityKey, now time.Time, wantOK, wantFull bool) {
	t.Helper()
	if ok, full := s.take(k, now); ok != wantOK || full != wantFull {
		t.Fatalf("take(%s): ok %v, full %v; want %v, %v", k.ActivityExecID, ok, full, wantOK, wantFull)
	}
}

// TestSlotsCap: under a cap, tries and launched activities hold slots until
// they are seen to end, by their process's exit or by the store.
func TestSlotsCap(t *testing.T) {
	now := time.Now()
	s := newSlots(2)
	mustTake(t, s, key("a"), now, true, false)
	mustTake(t, s, key("a"), now, false, false) // being tried already
	mustTake(t, s, key("b"), now, true, false)
	mustTake(t, s, key("c"), now, false, true)
	if exited := s.done(key("a"), true); exited {
		t.Fatal("done(a): exited, want running")
	}
	if exited := s.done(key("b"), false); exited {
		t.Fatal("done(b) that launched nothing: exited")
	}
	mustTake(t, s, key("c"), now, true, false) // b freed its slot
	mustTake(t, s, key("d"), now, false, true) // a runs, c is tried
	s.done(key("c"), true)
	if got := len(s.running()); got != 2 {
		t.Fatalf("%d running, want 2", got)
	}
	if !s.exited(key("a")) {
		t.Error("exited(a) under a cap: no slot freed")
	}
	s.ended(key("c")) // read ended from the store
	if got := s.running(); len(got) != 0 {
		t.Fatalf("running %v after both ended, want none", got)
	}
	mustTake(t, s, key("d"), now, true, false)
	mustTake(t, s, key("e"), now, true, false)
	mustTake(t, s, key("f"), now, false, true)
	s.release(key("e")) // the pass stopped before a worker took it
	mustTake(t, s, key("f"), now, true, false)
}

// TestSlotsExitWhileRecording: a process that exits while its try is still
// recording the launch takes no slot once the try ends, and the try says
// so, so that a pass fills the slot at once.
func TestSlotsExitWhileRecording(t *testing.T) {
	now := time.Now()
	s := newSlots(1)
	mustTake(t, s, key("a"), now, true, false)
	if !s.exited(key("a")) {
		t.Fatal("exited(a) under a cap: no slot freed")
	}
	mustTake(t, s, key("b"), now, false, true) // a's try still holds it
	if exited := s.done(key("a"), true); !exited {
		t.Fatal("done(a) after its exit: not exited, want its slot free at once")
	}
	if got := s.running(); len(got) != 0 {
		t.Fatalf("running %v, want none: a's process has exited", got)
	}
	mustTake(t, s, key("b"), now, true, false)
}

// TestSlotsNoCap: with no cap nothing is counted but the tries under way.
func TestSlotsNoCap(t *testing.T) {
	now := time.Now()
	s := newSlots(0)
	for _, n := range []string{"a", "b", "c"} {
		mustTake(t, s, key(n), now, true, false)
	}
	mustTake(t, s, key("a"), now, false, false)
	if s.exited(key("a")) {
		t.Error("exited(a) with no cap: a slot freed")
	}
	if exited := s.done(key("a"), true); exited {
		t.Error("done(a) with no cap: exited")
	}
	if got := s.running(); len(got) != 0 {
		t.Errorf("running %v with no cap, want nothing counted", got)
	}
	mustTake(t, s, key("a"), now, true, false)
}

// TestSlotsWaitingRetry: a retry waiting out its delay is passed over, not
// counted against the cap, until its not_before.
func TestSlotsWaitingRetry(t *testing.T) {
	now := time.Now()
	s := newSlots(1)
	mustTake(t, s, key("r"), now, true, false)
	s.wait(key("r"), now.Add(2*time.Second))
	s.done(key("r"), false)
	mustTake(t, s, key("r"), now.Add(time.Second), false, false)
	mustTake(t, s, key("r"), now.Add(2*time.Second), true, false)
	s.done(key("r"), false)

	s.wait(key("x"), now.Add(time.Second))
	s.prune(now)
	mustTake(t, s, key("x"), now, false, false)
	s.prune(now.Add(time.Second))
	if len(s.waiting) != 0 {
		t.Errorf("waiting %v after its not_before passed, want it forgotten", s.waiting)
	}
}

// TestSlotsRunningKeyListedAgain: an activity held as running that a
// listing shows READY again (an index that lags behind its claim) is not
// tried: its try would be refused and, ending, free the slot of an
// activity that still runs. It keeps its one slot until seen to end.
func TestSlotsRunningKeyListedAgain(t *testing.T) {
	now := time.Now()
	s := newSlots(1)
	mustTake(t, s, key("a"), now, true, false)
	s.done(key("a"), true)
	mustTake(t, s, key("a"), now, false, false) // listed READY while it runs
	mustTake(t, s, key("b"), now, false, true)  // a still holds the one slot
	if got := s.running(); len(got) != 1 {
		t.Fatalf("running %v, want a", got)
	}
	s.ended(key("a"))
	mustTake(t, s, key("b"), now, true, false)
}
