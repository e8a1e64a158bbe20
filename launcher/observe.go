package launcher

import (
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// Observer is told of each launch this launcher made and each it failed
// to make (metrics use it). It is called from the launch workers, several
// at once, and must not block.
type Observer interface {
	// Launched is told of an activity a backend started and whose launch
	// is recorded: its key and names, its launch type, and how long it
	// waited between becoming launchable (READY, or the end of a retry's
	// delay) and being started.
	Launched(a *state.ActivityExec, launchType string, waited time.Duration)
	// LaunchFailed is told of an activity this launcher recorded FAILED
	// because its launch did not happen; reason is one of the
	// LaunchFailure values.
	LaunchFailed(k state.ActivityKey, launchType string, reason LaunchFailure)
}

// LaunchFailure says why a launch failed, in a few words fit for a label.
type LaunchFailure string

// Why launches fail.
const (
	// FailedUnknownActivity: the activity is not in its workflow's
	// definition.
	FailedUnknownActivity LaunchFailure = "unknown_activity"
	// FailedBackend: the backend refused to start it, or kept failing for
	// longer than the launch may be retried.
	FailedBackend LaunchFailure = "backend"
	// FailedExited: the wrapper the backend started exited before it
	// claimed the activity.
	FailedExited LaunchFailure = "exited_before_claim"
)

// waitedSince is how long an activity read in READY has waited to be
// launched: since it became READY, or, for a retry, since its delay ended.
func waitedSince(a *state.ActivityExec, now time.Time) time.Duration {
	from := a.StateTime
	if a.NotBefore.After(from) {
		from = a.NotBefore
	}
	if from.IsZero() {
		return 0
	}
	return max(now.Sub(from), 0)
}
