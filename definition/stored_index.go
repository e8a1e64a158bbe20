package definition

import (
	"encoding/json"
	"iter"
	"maps"
	"sync"
)

// Dependents reads every entry that could name the activity it is asked
// about: once per call, that is a scan of the whole definition. A process
// that advances many activities of one workflow (a launcher supervising
// them inline) asks for every activity it runs, which would make a
// workflow of n activities cost n scans of n entries. After a few calls a
// Stored so indexes its entries once by the names their depends_on lists
// give, and a call reads only the entries the index points at (and those
// whose depends_on it could not read, which every call still reads). A
// process that asks once or twice (a wrapper's one advance) never pays for
// the index.

// indexAfter is how many calls of Dependents scan before the index is built.
const indexAfter = 4

// upstreamIndex is a Stored's index of its entries by the names their
// depends_on lists give.
type upstreamIndex struct {
	mu       sync.Mutex
	calls    int
	built    bool
	byName   map[string][]string // upstream name → the entries that name it
	unknowns []string            // entries whose depends_on could not be read
}

// candidates yields the entries (name, raw) that could name the activity
// name in their depends_on: every entry until the index is built, then
// those the index points at.
func (s *Stored) candidates(name string) iter.Seq2[string, json.RawMessage] {
	ix := &s.upstreams
	ix.mu.Lock()
	ix.calls++
	if !ix.built && ix.calls > indexAfter {
		ix.build(s)
	}
	if !ix.built {
		ix.mu.Unlock()
		return maps.All(s.entries)
	}
	names := append(append([]string(nil), ix.byName[name]...), ix.unknowns...)
	ix.mu.Unlock()
	return func(yield func(string, json.RawMessage) bool) {
		for _, n := range names {
			if !yield(n, s.entries[n]) {
				return
			}
		}
	}
}

// build indexes the entries by the names in their depends_on, each read
// as Activity reads it (and kept, as Activity keeps it): an entry that
// cannot be read is among the unknowns, which Dependents reads on every
// call, and so answers with its error as a scan would.
func (ix *upstreamIndex) build(s *Stored) {
	ix.byName = map[string][]string{}
	for n := range s.entries {
		a, err := s.Activity(n)
		if err != nil || a == nil {
			ix.unknowns = append(ix.unknowns, n)
			continue
		}
		seen := map[string]bool{}
		for _, up := range a.DependsOn {
			if !seen[up] {
				seen[up] = true
				ix.byName[up] = append(ix.byName[up], n)
			}
		}
	}
	ix.built = true
}
