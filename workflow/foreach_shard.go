package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/whimbrel/whimbrel/state"
)

// A map's count of final elements is spread over state.MapShards shards,
// shard k kept on the first attempt of element k (docs/for-each.md, "How
// it runs without a coordinator"). An element's end writes only its
// shard; the map's own account is written only by a step, and a step is
// taken only when a count may have changed what the map must do: when
// the elements final from the start of the list pass a checkpoint (every
// stride elements), when they reach an element that is missing or the
// end of the list, or when a failure may pass the tolerated count. So the
// map's item is read and written once per stride of elements, not once
// per element.

// elementKey is the key of the first attempt of element i of the map.
func elementKey(g graph, name string, i int) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ItemExecIDFor(g.id, name, i), WorkflowExecID: g.id}
}

// stride is how many elements the list's final front moves between two
// steps of a map with the given window: a quarter of the window, so the
// next pages are written while three quarters of it still run, and at
// most 250, so a step takes a page or three.
func stride(window int) int {
	return max(1, min(window/4, 250))
}

// shardSum is what a step reads of a map's shards.
type shardSum struct {
	// Done: every element below it is counted (the lowest front).
	Done                                  int
	Counted, Completed, Failed, Cancelled int
	FirstFailed                           []int
	items                                 int
	shards                                []*state.MapShard // by shard, nil where the shard's item is not written
}

// counted reports whether element i is counted.
func (s *shardSum) counted(i int) bool {
	k := state.ShardOf(i)
	return k < len(s.shards) && s.shards[k] != nil && s.shards[k].Has(i)
}

// readShards reads the shards of the map of items elements whose
// elements below created are written. A shard whose item is missing (its
// page's writer died) or not yet written counts nothing.
func readShards(ctx context.Context, st Advancer, g graph, name string, items, created int) (*shardSum, error) {
	n := min(state.MapShards, items)
	sum := &shardSum{items: items, shards: make([]*state.MapShard, n)}
	for k := range n {
		if k >= created {
			continue
		}
		a, err := st.GetActivity(ctx, elementKey(g, name, k))
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read shard %d of map %s: %w", k, name, err)
		}
		if sum.shards[k], err = state.ParseMapShard(a.MapShard); err != nil {
			return nil, fmt.Errorf("read shard %d of map %s: %w", k, name, err)
		}
	}
	sum.total()
	return sum, nil
}

// total sums the shards.
func (s *shardSum) total() {
	s.Done, s.Completed, s.Failed, s.Cancelled, s.FirstFailed = s.items, 0, 0, 0, nil
	for k, sh := range s.shards {
		if sh == nil {
			s.Done = min(s.Done, k)
			continue
		}
		s.Done = min(s.Done, sh.Front(k, s.items))
		s.Completed += sh.Completed
		s.Failed += sh.Failed
		s.Cancelled += sh.Cancelled
		s.FirstFailed = append(s.FirstFailed, sh.FirstFailed...)
	}
	s.Counted = s.Completed + s.Failed + s.Cancelled
	slices.Sort(s.FirstFailed)
	s.FirstFailed = s.FirstFailed[:min(len(s.FirstFailed), 5)]
	if len(s.FirstFailed) == 0 {
		s.FirstFailed = nil
	}
}

// add counts element i, final in state st, in the sum as its shard now
// counts it.
func (s *shardSum) add(i int, st state.ActivityState) {
	k := state.ShardOf(i)
	if k >= len(s.shards) {
		return
	}
	if s.shards[k] == nil {
		s.shards[k] = &state.MapShard{}
	}
	s.shards[k].Count(i, st)
	s.total()
}

// stepWanted says when a count calls for a step of the map, judged from
// the shards' sum read after the count.
type stepWanted struct {
	items     int // the map's
	tolerated int
	failed    bool // a failure that may pass the tolerated count
	crossing  int  // the lowest checkpoint the shard's front passed (-1: none)
	landed    int  // the shard's front before, when it now stands on a missing element (-1: no)
}

func (w stepWanted) any() bool { return w.failed || w.crossing >= 0 || w.landed >= 0 }

// due reports whether the map needs a step. The last count that moves
// the list's front past a checkpoint, onto a missing element (a page lost,
// or the window's end) or onto the list's end, or that takes the failures
// past the tolerated count, sees it in the shards it reads after its own
// write, so no such moment is missed however the counts interleave. The
// shards are read from the one after the count's own, and the reading
// stops at the first whose front is short of the mark: most counts are
// not the last to pass it, and learn so from a read or two.
func (w stepWanted) due(ctx context.Context, st Advancer, g graph, name string, k int) (bool, error) {
	if w.failed {
		sum, err := readShards(ctx, st, g, name, w.items, w.items)
		if err != nil || sum.Failed > w.tolerated {
			return err == nil, err
		}
	}
	mark := w.crossing // the front reached it
	if w.landed >= 0 {
		mark = w.landed + 1 // the front moved past where this shard held it
	}
	if mark < 0 {
		return false, nil
	}
	n := min(state.MapShards, w.items)
	for d := 1; d < n; d++ {
		j := (k + d) % n
		a, err := st.GetActivity(ctx, elementKey(g, name, j))
		if errors.Is(err, state.ErrNotFound) {
			if j < mark {
				return false, nil // its front is at j, which is missing
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read shard %d of map %s: %w", j, name, err)
		}
		sh, err := state.ParseMapShard(a.MapShard)
		if err != nil {
			return false, fmt.Errorf("read shard %d of map %s: %w", j, name, err)
		}
		if sh.Front(j, w.items) < mark {
			return false, nil
		}
	}
	return true, nil
}

// countElement counts element i of the named map, final in state s, in
// its shard: one compare-and-set of the shard's item, which a repeat
// finds done. It says what step of the map the count may call for.
func countElement(ctx context.Context, st Advancer, g graph, name string, i int, s state.ActivityState) (stepWanted, error) {
	none := stepWanted{crossing: -1, landed: -1}
	k := state.ShardOf(i)
	key := elementKey(g, name, k)
	for try := 0; try < maxStepTries; try++ {
		home, err := st.GetActivity(ctx, key)
		if errors.Is(err, state.ErrNotFound) {
			// The shard's element was in a page whose writer died: it is
			// written now, with the rest of that page.
			if err := writeLostPage(ctx, st, g, name, k); err != nil {
				return none, err
			}
			continue
		}
		if err != nil {
			return none, fmt.Errorf("count element %d of map %s: %w", i, name, err)
		}
		sh, err := state.ParseMapShard(home.MapShard)
		if err != nil {
			return none, fmt.Errorf("count element %d of map %s: %w", i, name, err)
		}
		if home.MapShard == "" {
			acc, err := runningAccount(ctx, st, g, name)
			if err != nil || acc == nil {
				return none, err // a map that ended counts nothing more
			}
			sh.Items, sh.Window, sh.Tolerated = acc.Items, acc.Window, acc.Tolerated
		}
		before := sh.Front(k, sh.Items)
		if !sh.Count(i, s) {
			// Counted already, by a repeat of this advance whose writer
			// died, or whose answer was lost, before it judged the step:
			// it is judged again, as that one would have.
			return wanted(ctx, st, g, name, sh, k, frontWithout(sh, k, i), s)
		}
		_, err = st.UpdateActivity(ctx, key, state.ActivityChange{From: state.ActivityStates,
			Swap: &state.Swap{Attr: "map_shard", Old: home.MapShard, New: sh.Encode()}})
		if errors.Is(err, state.ErrConflict) {
			continue // another count of the shard landed first
		}
		if err != nil {
			return none, fmt.Errorf("count element %d of map %s: %w", i, name, err)
		}
		return wanted(ctx, st, g, name, sh, k, before, s)
	}
	return none, fmt.Errorf("count element %d of map %s: its shard kept changing under %d tries; the monitor goes on", i, name, maxStepTries)
}

// wanted judges what step a count that moved shard k's front from before
// may call for.
func wanted(ctx context.Context, st Advancer, g graph, name string, sh *state.MapShard, k, before int, s state.ActivityState) (stepWanted, error) {
	w := stepWanted{items: sh.Items, tolerated: sh.Tolerated, crossing: -1, landed: -1}
	w.failed = s.EndedBadly() && sh.Failed <= sh.Tolerated+1
	after := sh.Front(k, sh.Items)
	if after == before {
		return w, nil
	}
	c := stride(sh.Window)
	if next := (before/c + 1) * c; next <= after && next <= sh.Items {
		w.crossing = next
	}
	if after >= sh.Items {
		// The shard is all counted: the map can end once every shard is,
		// which the last of them to be sees.
		if w.crossing < 0 {
			w.crossing = sh.Items
		}
		return w, nil
	}
	_, err := st.GetActivity(ctx, elementKey(g, name, after))
	switch {
	case errors.Is(err, state.ErrNotFound):
		w.landed = before
	case err != nil:
		return w, fmt.Errorf("count element of map %s: read element %d: %w", name, after, err)
	}
	return w, nil
}

// frontWithout is shard k's front were element i not counted.
func frontWithout(sh *state.MapShard, k, i int) int {
	without := *sh
	without.Marked = slices.Clone(sh.Marked)
	j := i / state.MapShards
	without.Marked[j/8] &^= 1 << (j % 8)
	return without.Front(k, sh.Items)
}

// runningAccount reads the account of the named map; nil when the map is
// not running.
func runningAccount(ctx context.Context, st Advancer, g graph, name string) (*state.MapProgress, error) {
	m, err := st.GetActivity(ctx, g.mapKey(name))
	if err != nil {
		return nil, fmt.Errorf("read map %s: %w", name, err)
	}
	if m.State != state.Running || m.Map == "" {
		return nil, nil
	}
	acc, err := state.ParseMap(m.Map)
	if err != nil {
		return nil, fmt.Errorf("read map %s: %w", name, err)
	}
	return acc, nil
}

// writeLostPage writes the missing element i of the named map and the
// rest of its page, when i is below the account's created.
func writeLostPage(ctx context.Context, st Advancer, g graph, name string, i int) error {
	m, err := st.GetActivity(ctx, g.mapKey(name))
	if err != nil {
		return fmt.Errorf("read map %s: %w", name, err)
	}
	acc, err := state.ParseMap(m.Map)
	act := g.forEach(name)
	if err != nil || act == nil || i >= acc.Created {
		return fmt.Errorf("count element %d of map %s: it is not written and not announced by the account %q", i, name, m.Map)
	}
	return createElements(ctx, st, g, m, act, i, min(acc.Created, i+PageSize), true)
}

// CountedElements is how many of the map m's elements are counted final
// in its shards: the monitor's sign that a map moves although its account
// did not change.
func CountedElements(ctx context.Context, st Advancer, m *state.ActivityExec) (int, error) {
	acc, err := state.ParseMap(m.Map)
	if err != nil {
		return 0, err
	}
	g, err := graphOf(ctx, st, m.WorkflowExecID)
	if err != nil {
		return 0, fmt.Errorf("count map %s: %w", m.ActivityExecID, err)
	}
	sum, err := readShards(ctx, st, g, m.ActivityName, acc.Items, acc.Created)
	if err != nil {
		return 0, err
	}
	return sum.Counted, nil
}
