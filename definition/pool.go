package definition

import (
	"fmt"

	"github.com/whimbrel/whimbrel/state"
)

// Pools: an activity with `pool: NAME` starts only while it holds
// pool_slots (default 1) of that pool's slots, which every launcher and
// every workflow share (docs/pools.md). The fields are
// Settings, so `defaults:` gives them to every activity that names no
// pool of its own, for_each items and finally activities included.

// inheritPool fills in the pool settings from the defaults.
func (s *Settings) inheritPool(def Settings) {
	if s.Pool == "" {
		s.Pool = def.Pool
	}
	if s.PoolSlots == 0 {
		s.PoolSlots = def.PoolSlots
	}
	if s.Pool != "" && s.PoolSlots == 0 {
		s.PoolSlots = 1
	}
}

// checkPool checks the pool settings.
func (s Settings) checkPool() []string {
	var errs []string
	if s.Pool != "" {
		if err := state.CheckPoolName(s.Pool); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if s.PoolSlots < 0 || s.PoolSlots > state.SlotsPerShard {
		errs = append(errs, fmt.Sprintf("pool_slots %d is out of range: give 1 to %d", s.PoolSlots, state.SlotsPerShard))
	}
	return errs
}
