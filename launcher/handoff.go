package launcher

import (
	"context"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// handoffCap bounds the keys waiting in a launcher's handoff. Beyond it
// keys are dropped and the next pass lists the READY index instead, which
// finds them: the handoff only saves that listing, it is never the one
// record of an activity to launch.
const handoffCap = 1024

// handoff holds the activities that an advance made in the launcher's own
// process readied (a backend that supervises activities inline advances
// their workflows there), so that a pass tries them at once without
// listing the READY index through its shards: the listing of every shard
// costs more calls than the hop's own writes on DynamoDB. The listing at
// each interval, nudge and freed slot stays, so an activity whose key is
// lost here (dropped, or the launcher died) is launched from it.
type handoff struct {
	mu      sync.Mutex
	keys    []state.ActivityKey
	dropped bool          // keys were dropped: the next pass lists
	handed  chan struct{} // one wake waits at most
}

func newHandoff() *handoff { return &handoff{handed: make(chan struct{}, 1)} }

// Handoff hands the launcher activities that were just readied, in the
// launcher's own process: a pass tries them at once, without listing the
// READY index (the claim's conditional write decides, as for a listed
// one). A backend that supervises activities inline calls it from their
// advance.
func (l *Launcher) Handoff(keys []state.ActivityKey) {
	if len(keys) == 0 {
		return
	}
	h := l.handoff
	h.mu.Lock()
	room := handoffCap - len(h.keys)
	if len(keys) > room {
		keys, h.dropped = keys[:max(room, 0)], true
	}
	h.keys = append(h.keys, keys...)
	h.mu.Unlock()
	select {
	case h.handed <- struct{}{}:
	default:
	}
}

// take empties the handoff: the keys handed since the last take, and
// whether some were dropped.
func (h *handoff) take() ([]state.ActivityKey, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys, dropped := h.keys, h.dropped
	h.keys, h.dropped = nil, false
	return keys, dropped
}

// pending reports whether the handoff holds keys, and whether some were
// dropped (the next pass that takes them lists).
func (h *handoff) pending() (keys, dropped bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.keys) > 0, h.dropped
}

// readyRefs is what a pass launches from. With list, or when the handoff
// dropped keys, it lists the READY index (Limit scan) and adds the handed
// keys the listing does not hold yet (an index lags its table); without,
// it is the handed keys alone. Each is read again before its claim
// (try), so a key handed twice, or no longer READY, launches nothing.
// listed reports whether it listed the index.
func (l *Launcher) readyRefs(ctx context.Context, list bool) (refs []state.ActivityRef, listed bool, err error) {
	keys, dropped := l.handoff.take()
	if listed = list || dropped; listed {
		l.listings.Add(1)
		refs, err = l.st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: scan})
	}
	if len(keys) == 0 {
		return refs, listed, err
	}
	seen := make(map[state.ActivityKey]bool, len(refs)+len(keys))
	for _, r := range refs {
		seen[r.ActivityKey] = true
	}
	now := time.Now()
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			refs = append(refs, state.ActivityRef{ActivityKey: k, StateTime: now})
		}
	}
	return refs, listed, err
}

// Listings is how many times the passes so far listed the READY index.
func (l *Launcher) Listings() int64 { return l.listings.Load() }
