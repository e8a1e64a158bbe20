package simpleapi

import (
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

// TestOrder checks the rank events take by the state they ask for: the
// states before the end in the order an activity passes through them, a
// heartbeat after RUNNING, and every end (and CANCEL, and anything
// unknown) last, tied, so that the ends go by their when.
func TestOrder(t *testing.T) {
	want := map[string]int{
		string(state.Requested): 0, string(state.Ready): 1, string(state.Queued): 2,
		string(state.Preparing): 3, string(state.Running): 4, state.TransitionHeartbeat: 5,
		state.TransitionCancel: 6, string(state.Cancelled): 6, string(state.CancelledRunning): 6,
		string(state.TimedOut): 6, string(state.Failed): 6, string(state.Completed): 6, "BOGUS": 6,
	}
	for tr, w := range want {
		if got := order(tr); got != w {
			t.Errorf("order(%s) = %d, want %d", tr, got, w)
		}
	}
	for _, s := range state.ActivityStates {
		if _, ok := want[string(s)]; !ok {
			t.Errorf("state %s has no expected order", s)
		}
	}
}
