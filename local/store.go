package local

import (
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a local run needs of a store: it starts the workflow, runs
// its own launcher and monitor on it, watches it, and cancels it when
// interrupted.
type Store interface {
	workflow.Starter
	launcher.Store
	monitor.Store
}
