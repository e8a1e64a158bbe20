package launcher

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Backend starts activities of one launch type. The backends live in
// packages of their own (launcher/local, launcher/docker, launcher/ecs),
// so that a binary links only those it wires.
type Backend interface {
	// Launch starts the activity's wrapper and returns what it started: a
	// pid, a container ID, a task ARN.
	Launch(ctx context.Context, j Job) (string, error)
}

// patient is implemented by backends whose calls may need longer than
// Config.CallTimeout, such as docker run pulling an image.
type patient interface {
	// CallTimeout is the least deadline one call needs.
	CallTimeout() time.Duration
}

// guardWaiter is implemented by a backend that guards the wrappers it
// started (launcher/local): WaitGuards waits for the guards still stopping
// the commands of wrappers that died.
type guardWaiter interface{ WaitGuards() }

// Job is what a backend needs to start one activity.
type Job struct {
	Key          state.ActivityKey
	WorkflowName string
	ActivityName string
	// Attempt is the item's attempt as read before the launch: n for a
	// retry's item, 0 for a first attempt (its claim writes 1). With the
	// key, it names this launch.
	Attempt int
	// Token is the launcher's claim token, the item's owner until the
	// wrapper claims it.
	Token   string
	Command []string
	// Env is the environment of the wrapper: its identity, the store, the
	// activity's settings and the definition's env.
	Env      map[string]string
	Settings definition.Settings // with the defaults filled in
	// Workflow is the workflow's item as the launcher's pass read it
	// (its state read then, its definition and parameters, which never
	// change, read once), or nil. A backend that supervises the activity
	// in the launcher's process hands it to the claim, which need not
	// read the item again (wrapper.Config.Workflow).
	Workflow *state.WorkflowExec
	// FromReady is set when the launcher made no claim: the activity is
	// READY, and the backend's supervisor claims it to RUNNING itself
	// (ReadyClaimer). Token is then empty.
	FromReady bool
}

// launchNamespace seeds the name-based UUIDs that name launches.
var launchNamespace = uuid.MustParse("6f2b8c1a-3d4e-4f50-8a9b-0c1d2e3f4a5b")

// LaunchToken names this launch of the activity, the same every time it is
// computed, for backends that refuse a second launch of one name (ECS's
// clientToken, Docker's container names): a launch repeated because its
// answer was lost then starts nothing twice.
func (j Job) LaunchToken() string {
	return uuid.NewSHA1(launchNamespace, []byte(j.Key.ActivityExecID+"/"+strconv.Itoa(j.Attempt))).String()
}

// Environ is the wrapper's environment, Env, as KEY=VALUE in a stable
// order.
func (j Job) Environ() []string {
	out := make([]string, 0, len(j.Env))
	for k, v := range j.Env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// TemporaryError is a launch error that may pass: the launcher tries the
// launch again, with backoff, until the activity's launch deadline.
// Backends return it for throttling, server errors, unreachable endpoints
// and the like; any other error fails the activity at once.
type TemporaryError struct{ Err error }

func (e *TemporaryError) Error() string { return e.Err.Error() }
func (e *TemporaryError) Unwrap() error { return e.Err }
