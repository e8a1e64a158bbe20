package launcher

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// TestFairOldestFirstWithinAWorkflow: each workflow's READY activities
// come out of fair by the time they became READY, in runs of spread shuffled
// among themselves, whatever order the store listed them in; and each run
// is shuffled, so that launchers reading the same index spread out.
func TestFairOldestFirstWithinAWorkflow(t *testing.T) {
	base := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	var refs []state.ActivityRef
	rank := map[string]int{}
	for i := 0; i < 1000; i++ {
		id := fmt.Sprintf("a%04d", i)
		rank[id] = i
		refs = append(refs, state.ActivityRef{ActivityKey: state.ActivityKey{ActivityExecID: id, WorkflowExecID: "w"}, StateTime: base.Add(time.Duration(i) * time.Millisecond)})
	}
	rand.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
	out := fair(refs, "")
	if len(out) != len(refs) {
		t.Fatalf("fair returned %d of %d", len(out), len(refs))
	}
	inPlace := 0
	for p, r := range out {
		if got := rank[r.ActivityExecID]; got/spread != p/spread {
			t.Fatalf("position %d holds the activity %d oldest (run %d), want one of run %d", p, got, got/spread, p/spread)
		}
		if rank[r.ActivityExecID] == p {
			inPlace++
		}
	}
	if inPlace > len(out)/2 {
		t.Errorf("%d of %d activities in their exact order of age: the runs are not shuffled", inPlace, len(out))
	}
}
