package workflow

import "github.com/whimbrel/whimbrel/state"

// mapsIn reports whether some of ids are for_each maps or their elements
// (an element's ID carries its map's activity name).
func (g graph) mapsIn(ids []string) bool {
	for _, id := range ids {
		if name, _, err := state.SplitID(id); err == nil && g.forEach(name) != nil {
			return true
		}
	}
	return false
}
