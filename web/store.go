package web

import (
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what the web view needs of a store: executions to list and
// read, and to cancel and rerun. A store that also keeps schedules
// (state.Schedules, an optional capability looked for by assertion) shows
// them.
type Store interface {
	inspect.Lister
	workflow.Starter
}

// scheduleStore is a Store that keeps schedules: the schedules pages read
// them, and the executions their runs started.
type scheduleStore interface {
	Store
	state.Schedules
}
