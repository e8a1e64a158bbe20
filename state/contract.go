package state

import "time"

// This file holds the values of the client contract that more than one
// layer must agree on: the wrapper, the launcher, the monitor, the CLI and
// the Simple Lambda API all refer to these definitions instead of writing
// their own copies. Tunables private to one component stay in its package.

// Stopping a command.
const (
	// DefaultKillGrace is how long a command is given between SIGTERM and
	// SIGKILL when it is stopped (an activity's kill_grace, whimbrel-run's
	// --kill-grace): ECS's default stop timeout. The Docker backend gives
	// a container this plus a margin as its stop timeout.
	DefaultKillGrace = 30 * time.Second
)
