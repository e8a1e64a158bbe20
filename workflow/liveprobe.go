package workflow

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/whimbrel/whimbrel/state"
)

// liveProbeSize is how many of a workflow's activities probeLive reads.
const liveProbeSize = 4

// liveProber is a store that tells whether any of the named activities is
// not terminal, reading their states alone (DynamoDB: one BatchGetItem
// projected on state), without listing the workflow's activities first.
type liveProber interface {
	AnyLiveOf(ctx context.Context, keys []state.ActivityKey) (bool, error)
}

// probeLive reports whether a few of the workflow's activities, picked at
// random among the first attempts its stored definition names when it
// names more than a few (whose keys
// follow from their names), show that it is not done: one of them is not
// terminal. false means none of those read was live, or the store or the
// graph cannot tell: the caller goes on to look at them all. While most
// of a fan-out's activities run, each advance's settle is answered by one
// read of a few items, not by listing the workflow's every key through
// its index first.
func probeLive(ctx context.Context, st Reader, g graph) (bool, error) {
	lp, ok := st.(liveProber)
	if !ok || g.def == nil {
		return false, nil
	}
	names := g.def.Names()
	if len(names) <= liveProbeSize {
		// AnyLive reads them all for about what the probe costs, and a
		// workflow of one activity has none left to find live.
		return false, nil
	}
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	keys := make([]state.ActivityKey, 0, liveProbeSize)
	for _, n := range names[:min(len(names), liveProbeSize)] {
		keys = append(keys, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(g.id, n), WorkflowExecID: g.id})
	}
	live, err := lp.AnyLiveOf(ctx, keys)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", g.id, err)
	}
	return live, nil
}
