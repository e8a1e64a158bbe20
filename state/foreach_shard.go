package state

import (
	"encoding/json"
	"fmt"
	"slices"
)

// MapShards is how many shards a map's count of final elements is spread
// over: element i is counted in shard i mod MapShards, and shard k is kept
// on the first attempt of element k (its map_shard attribute,
// docs/contract.md#for_each-maps). Every element's end writes only its
// shard, so at 10,000 element ends a second each shard's item takes about
// 10,000/MapShards writes a second, well under a key's limit.
const MapShards = 32

// MapShard is one shard of a map's count: which of its elements are final
// (counted exactly once each: a bit per element, set by compare-and-set,
// so a repeated count finds its bit set and changes nothing), and how
// many of them completed, failed or were cancelled. Items, Window and
// Tolerated are the map's, copied from its account when the shard is
// first written, so an element's wrapper can judge from its shard alone
// whether the map may need a step.
type MapShard struct {
	Items     int `json:"items"`
	Window    int `json:"window"`
	Tolerated int `json:"tolerated"`
	// Marked holds a bit per element of the shard, for element
	// k + MapShards*j at bit j: set once it is final and counted.
	Marked    []byte `json:"marked,omitempty"`
	Completed int    `json:"completed,omitempty"`
	Failed    int    `json:"failed,omitempty"`
	Cancelled int    `json:"cancelled,omitempty"`
	// FirstFailed are the lowest indexes of the shard's failed elements
	// (at most five), for the map's reason.
	FirstFailed []int `json:"first_failed,omitempty"`
}

// ShardOf is the shard that counts element i.
func ShardOf(i int) int { return i % MapShards }

// ParseMapShard reads a shard; an empty one is a shard with nothing
// counted yet.
func ParseMapShard(s string) (*MapShard, error) {
	var sh MapShard
	if s == "" {
		return &sh, nil
	}
	if err := json.Unmarshal([]byte(s), &sh); err != nil {
		return nil, fmt.Errorf("map shard %q: %w", s, err)
	}
	if sh.Items < 0 || sh.Completed < 0 || sh.Failed < 0 || sh.Cancelled < 0 {
		return nil, fmt.Errorf("map shard %q does not add up", s)
	}
	return &sh, nil
}

// Encode writes the shard in its stored form.
func (sh MapShard) Encode() string {
	b, _ := json.Marshal(sh) // numbers, a byte slice and a list of numbers always encode
	return string(b)
}

// Has reports whether element i (of this shard) is counted.
func (sh *MapShard) Has(i int) bool {
	j := i / MapShards
	return j/8 < len(sh.Marked) && sh.Marked[j/8]&(1<<(j%8)) != 0
}

// Count counts element i, which ended in the final state s, and reports
// false when it was counted already (nothing changes then).
func (sh *MapShard) Count(i int, s ActivityState) bool {
	if sh.Has(i) {
		return false
	}
	j := i / MapShards
	if j/8 >= len(sh.Marked) {
		sh.Marked = append(sh.Marked, make([]byte, j/8+1-len(sh.Marked))...)
	}
	sh.Marked[j/8] |= 1 << (j % 8)
	switch {
	case s == Completed:
		sh.Completed++
	case s.EndedBadly():
		sh.Failed++
		sh.FirstFailed = append(sh.FirstFailed, i)
		slices.Sort(sh.FirstFailed)
		sh.FirstFailed = sh.FirstFailed[:min(len(sh.FirstFailed), 5)]
	default:
		sh.Cancelled++
	}
	return true
}

// Counted is how many of the shard's elements are counted.
func (sh *MapShard) Counted() int { return sh.Completed + sh.Failed + sh.Cancelled }

// Front is the lowest element of shard k that is not counted: every
// element of the shard below it is final. A shard whose every element is
// counted answers items or more.
func (sh *MapShard) Front(k, items int) int {
	i := k
	for i < items && sh.Has(i) {
		i += MapShards
	}
	return max(i, min(k, items))
}
