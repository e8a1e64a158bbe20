package workflow

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// One process steps a map once at a time. When the elements of a map run
// in one process (a launcher that supervises them inline, whimbrel run),
// many of them end at once and judge a step due together; were each to
// step, all but one would lose the account's compare-and-set, and each
// loser would read the 32 shards and the map again and try again, so the
// reads grow with the square of the steppers, and the steppers with the
// time those reads take. Instead, an element that finds a step of its map
// under way in its process asks that step for one more pass and returns:
// the pass reads the shards after the element's count was written, so it
// sees it, and does what the element's own step would have done. Across
// processes nothing changes: their steps meet at the compare-and-set as
// before. A pass asked for and not taken (the stepping element's process
// died, or its step failed) is what the monitor's sweep finishes, as it
// finishes the step of a wrapper that died after its count
// (docs/for-each.md, "How it runs without a coordinator").

// mapSteps is the steps under way in this process, by map: present while
// one is taken, true when another pass was asked for meanwhile.
var mapSteps = struct {
	sync.Mutex
	again map[mapStepKey]bool
}{again: map[mapStepKey]bool{}}

// mapStepKey names a map in one store: two stores in one process (tests,
// a tool reading two) may hold maps of the same IDs.
type mapStepKey struct {
	store any
	key   state.ActivityKey
}

// stepKey is the key of the map of the named activity in st, and false
// when st cannot be told apart from another store (a store whose type
// cannot be compared steps every time, as a separate process would).
func stepKey(st Advancer, g graph, name string) (mapStepKey, bool) {
	if v := reflect.ValueOf(st); !v.IsValid() || !v.Comparable() {
		return mapStepKey{}, false
	}
	return mapStepKey{store: st, key: g.mapKey(name)}, true
}

// stepMapShared reads the named map and takes a step of it, or, when a
// step of it is under way in this process, asks that one for another
// pass and returns at once with an empty Result.
func stepMapShared(ctx context.Context, st Advancer, g graph, name string, log hclog.Logger) (Result, error) {
	k, ok := stepKey(st, g, name)
	if !ok {
		return stepMapNow(ctx, st, g, name, log)
	}
	mapSteps.Lock()
	if _, busy := mapSteps.again[k]; busy {
		mapSteps.again[k] = true
		mapSteps.Unlock()
		return Result{}, nil
	}
	mapSteps.again[k] = false
	mapSteps.Unlock()
	var res Result
	for {
		more, err := stepMapNow(ctx, st, g, name, log)
		res.Readied = append(res.Readied, more.Readied...)
		res.Cancelled = append(res.Cancelled, more.Cancelled...)
		if more.Settled != "" {
			res.Settled = more.Settled
		}
		mapSteps.Lock()
		again := mapSteps.again[k]
		if err != nil || !again {
			// A pass asked for after this one's reads and not taken here
			// is the monitor's, as when this process dies.
			delete(mapSteps.again, k)
			mapSteps.Unlock()
			return res, err
		}
		mapSteps.again[k] = false
		mapSteps.Unlock()
	}
}

// stepMapNow reads the named map and takes a step of it.
func stepMapNow(ctx context.Context, st Advancer, g graph, name string, log hclog.Logger) (Result, error) {
	m, err := st.GetActivity(ctx, g.mapKey(name))
	if err != nil {
		return Result{}, fmt.Errorf("step map %s: read it: %w", g.mapKey(name).ActivityExecID, err)
	}
	return stepMap(ctx, st, g, m, log)
}
