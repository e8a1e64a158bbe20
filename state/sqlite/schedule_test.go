package sqlite_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func TestScheduleConformance(t *testing.T) {
	storetest.RunSchedules(t, storetest.Harness{New: func(t *testing.T) state.Store { return newStore(t) }})
}

func TestPoolConformance(t *testing.T) {
	storetest.RunPools(t, storetest.Harness{New: func(t *testing.T) state.Store { return newStore(t) }})
}
