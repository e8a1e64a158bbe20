package state_test

import (
	"slices"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

// TestMapShardCountsEachElementOnce: a shard counts an element once
// however often it is told, its front is the lowest element of the shard
// not counted, and it keeps the lowest failed indexes, at most five, in
// order; its stored form reads back the same, and what is not a shard is
// refused.
func TestMapShardCountsEachElementOnce(t *testing.T) {
	const items, k = 1000, 7
	sh, err := state.ParseMapShard("")
	if err != nil || sh.Counted() != 0 || sh.Front(k, items) != k {
		t.Fatalf("an empty shard: %+v (%v)", sh, err)
	}
	sh.Items = items
	for _, i := range []int{k + 32*9, k + 32*8, k + 32*7, k + 32*6, k + 32*5, k + 32*4, k} {
		if !sh.Count(i, state.Failed) {
			t.Fatalf("element %d was not counted", i)
		}
	}
	if sh.Count(k, state.Completed) || sh.Count(k+32*9, state.Failed) {
		t.Error("an element counted twice")
	}
	if sh.Counted() != 7 || sh.Failed != 7 || sh.Completed != 0 {
		t.Errorf("counts %+v, want 7 failed", sh)
	}
	if want := []int{k, k + 32*4, k + 32*5, k + 32*6, k + 32*7}; !slices.Equal(sh.FirstFailed, want) {
		t.Errorf("first failed %v, want %v", sh.FirstFailed, want)
	}
	if f := sh.Front(k, items); f != k+32 {
		t.Errorf("front %d, want %d", f, k+32)
	}
	for j := 1; j < 4; j++ {
		sh.Count(k+32*j, state.Completed)
	}
	if f := sh.Front(k, items); f != k+32*10 {
		t.Errorf("front %d, want %d", f, k+32*10)
	}
	back, err := state.ParseMapShard(sh.Encode())
	if err != nil || back.Encode() != sh.Encode() || back.Front(k, items) != k+32*10 {
		t.Errorf("read back %+v (%v), want %+v", back, err, sh)
	}
	small := &state.MapShard{Items: 3}
	small.Count(2, state.Cancelled)
	if f := small.Front(2, 3); f < 3 || small.Cancelled != 1 {
		t.Errorf("a shard of one element, counted: front %d, %+v", f, small)
	}
	for _, bad := range []string{"<script>", `{"items":-1}`, "\x1b[2J"} {
		if _, err := state.ParseMapShard(bad); err == nil {
			t.Errorf("ParseMapShard(%q) accepted it", bad)
		}
	}
}
