package attr

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/whimbrel/whimbrel/state"
)

// --- pool

// The pool table holds two kinds of item under one hash key, the pool's
// name: its definition (entry EntryPool) and its slot shards (entry
// "slots/<index>"), each with its capacity and its holders.
const (
	EntryPool   = "pool"
	slotsPrefix = "slots/"
)

// SlotsEntry is the entry of shard i.
func SlotsEntry(i int) string { return slotsPrefix + strconv.Itoa(i) }

// IsSlotsEntry reports whether an entry is a shard's, and which.
func IsSlotsEntry(entry string) (int, bool) {
	if !strings.HasPrefix(entry, slotsPrefix) {
		return 0, false
	}
	i, err := strconv.Atoi(entry[len(slotsPrefix):])
	return i, err == nil && i >= 0
}

// EncodePool writes a pool's definition.
func EncodePool(p *state.Pool) Item {
	m := Item{
		"pool_name": S(p.Name), "entry": S(EntryPool),
		"slots": Int(p.Slots), "version": Int(p.Version),
	}
	putStr(m, "description", p.Description)
	putTime(m, "set_time", p.SetTime, false)
	return m
}

// DecodePool reads a pool's definition.
func DecodePool(table string, m Item) (*state.Pool, error) {
	d := newDecoder(table, m, "pool_name", "entry")
	p := &state.Pool{
		Name:        d.str("pool_name", true),
		Description: d.str("description", false),
		SetTime:     d.time("set_time"),
	}
	var ok bool
	if p.Slots, ok = d.integer("slots"); !ok && d.err == nil {
		d.fail("slots", "missing: set the pool again with whimbrel pool set")
	}
	if p.Slots < 0 {
		d.fail("slots", "%d is negative: set the pool again with whimbrel pool set", p.Slots)
	}
	p.Version, _ = d.integer("version")
	return p, d.err
}

// EncodePoolShard writes a slot shard.
func EncodePoolShard(s *state.PoolShard) Item {
	hs := s.Holders
	if hs == nil {
		hs = []state.PoolHolder{}
	}
	b, _ := json.Marshal(hs) // plain fields always marshal
	return Item{
		"pool_name": S(s.Pool), "entry": S(SlotsEntry(s.Index)),
		"capacity": Int(s.Capacity), "holders": S(b), "version": Int(s.Version),
	}
}

// DecodePoolShard reads a slot shard. A shard whose holders cannot be
// read is malformed: counting it as empty would let in more holders than
// its capacity.
func DecodePoolShard(table string, m Item) (*state.PoolShard, error) {
	d := newDecoder(table, m, "pool_name", "entry")
	s := &state.PoolShard{Pool: d.str("pool_name", true)}
	entry := d.str("entry", true)
	i, ok := IsSlotsEntry(entry)
	if !ok && d.err == nil {
		d.fail("entry", "%q is not slots/<index>", entry)
	}
	s.Index = i
	s.Capacity, _ = d.integer("capacity")
	s.Version, _ = d.integer("version")
	if h := d.str("holders", false); h != "" {
		if err := json.Unmarshal([]byte(h), &s.Holders); err != nil {
			d.fail("holders", "not a JSON list of holders: %v", err)
		}
	}
	for _, h := range s.Holders {
		if h.ActivityExecID == "" || h.Slots < 1 {
			d.fail("holders", "a holder has no activity_exec_id or fewer than 1 slot")
			break
		}
	}
	return s, d.err
}

// PoolConflict says what a pool item held instead of version prev.
func PoolConflict(name, entry string, prev int, old Item) error {
	want := fmt.Sprintf("version %d", prev)
	if prev == 0 {
		want = "no item yet"
	}
	got := "absent"
	if old != nil {
		got = "at version ?"
		if v, ok := old["version"].(N); ok {
			got = "at version " + string(v)
		}
	}
	return &state.ConflictError{Kind: "pool " + entry, ID: name, Want: want, State: got}
}
