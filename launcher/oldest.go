package launcher

import (
	"math/rand/v2"
	"slices"

	"github.com/whimbrel/whimbrel/state"
)

// spread is how many of a workflow's oldest READY activities a pass takes
// in random order before it takes any younger one.
const spread = 64

// oldestFirst orders one workflow's READY activities by the time they
// became READY, and shuffles each run of spread of them. A for_each map
// counts its elements in index order and writes the next page only as the
// oldest become final (docs/for-each.md): launched in random order over a
// whole window of a thousand, its oldest element waits behind hundreds of
// younger ones, its window stays full and no page is written until that
// one ends, and then every wrapper ending meanwhile reads the hundreds of
// final elements in between to count them.
// Oldest first keeps the window moving; the shuffle within a run still
// spreads launchers that read the same index over different activities.
func oldestFirst(rs []state.ActivityRef) {
	slices.SortStableFunc(rs, func(a, b state.ActivityRef) int { return a.StateTime.Compare(b.StateTime) })
	for lo := 0; lo < len(rs); lo += spread {
		run := rs[lo:min(lo+spread, len(rs))]
		rand.Shuffle(len(run), func(i, j int) { run[i], run[j] = run[j], run[i] })
	}
}
