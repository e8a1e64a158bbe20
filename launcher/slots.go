package launcher

import (
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// slots is the launcher's account of the activities it handles, and with
// it the Config.MaxRunning cap. It is safe for concurrent use.
//
// An activity takes a slot from the moment a pass hands it to a worker
// (take) until the try ends (done). Under a cap, one the try launched
// keeps its slot until it is seen to end: its backend says its process
// exited (exited), or a pass reads it ended from the store (ended). A
// process that exits while its try is still recording the launch frees
// the slot when the try ends: the launch is not counted as running. With
// no cap only the tries under way are held, so that no activity is tried
// twice at once; nothing else is counted.
//
// slots also remembers the retries seen waiting out their delay: their
// not_before never changes, so they are passed over, without a read,
// until then.
type slots struct {
	max int // 0: no cap

	mu      sync.Mutex
	held    map[state.ActivityKey]hold
	waiting map[state.ActivityKey]time.Time // by not_before
}

// hold is why an activity holds a slot.
type hold uint8

const (
	// trying: a worker is claiming and launching it.
	trying hold = iota + 1
	// tryingExited: a worker is recording its launch, and the process
	// launched has exited already. The try takes no slot once it ends.
	tryingExited
	// running: launched, and not yet seen to end. Held under a cap only.
	running
)

// newSlots returns the account of a launcher that runs at most max
// activities at once (0: no cap).
func newSlots(max int) *slots {
	return &slots{max: max, held: map[state.ActivityKey]hold{}, waiting: map[state.ActivityKey]time.Time{}}
}

// take marks k as being tried, and reports whether the pass may hand it to
// a worker. It does not when k is being tried or held as running already, or waits out a
// retry delay that has not passed at now; then full is false and the pass
// goes on to the next activity. full is true when the cap leaves no slot:
// the pass hands out no more.
func (s *slots) take(k state.ActivityKey, now time.Time) (ok, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A key held as running is one this launcher launched: a listing
	// that shows it READY lags behind its claim, for no key goes back to
	// READY once claimed (a retry is a new key; docs/contract.md#transitions).
	// It keeps its one slot until it is seen to end (exited, ended).
	if h := s.held[k]; h != 0 {
		return false, false
	}
	if t, wait := s.waiting[k]; wait {
		if now.Before(t) {
			return false, false
		}
		delete(s.waiting, k)
	}
	if s.max > 0 && len(s.held) >= s.max {
		return false, true
	}
	s.held[k] = trying
	return true, false
}

// done ends the try of k that take began: one that launched is held as
// running under a cap, one that did not frees its slot. It reports whether
// the process launched has exited already: its slot is free now, and a
// pass may fill it.
func (s *slots) done(k state.ActivityKey, launched bool) (exited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exited = s.held[k] == tryingExited
	if launched && s.max > 0 && !exited {
		s.held[k] = running
	} else {
		delete(s.held, k)
	}
	return exited
}

// exited is told that the process launched for k has ended. Under a cap
// its slot is free (at once, or when its try ends, if that is still
// recording the launch), and exited reports true: a pass may fill it.
// Without a cap there is nothing to free.
func (s *slots) exited(k state.ActivityKey) bool {
	if s.max <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.held[k] {
	case trying:
		s.held[k] = tryingExited
	case running:
		delete(s.held, k)
	}
	return true
}

// wait notes that k is a retry waiting out its delay until notBefore.
func (s *slots) wait(k state.ActivityKey, notBefore time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[k] = notBefore
}

// prune forgets the retry delays that are over at now, so that retries
// another launcher has launched since are not remembered for ever.
func (s *slots) prune(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.waiting {
		if !now.Before(t) {
			delete(s.waiting, k)
		}
	}
}

// running returns the activities held as running: launched, and not yet
// seen to end.
func (s *slots) running() []state.ActivityKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []state.ActivityKey
	for k, h := range s.held {
		if h == running {
			out = append(out, k)
		}
	}
	return out
}

// ended frees the slot of k, held as running, that a pass has read to be
// ended (or unreadable) in the store.
func (s *slots) ended(k state.ActivityKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[k] == running {
		delete(s.held, k)
	}
}

// release gives back the slot of k, taken by a pass that then stopped
// before a worker took it.
func (s *slots) release(k state.ActivityKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, k)
}
