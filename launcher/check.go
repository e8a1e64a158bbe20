package launcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Types returns the launch types a launcher can serve, each by the backend
// of the package named after it (launcher/local, launcher/docker,
// launcher/ecs, launcher/kubernetes).
func Types() []string {
	return []string{definition.LaunchLocal, definition.LaunchDocker, definition.LaunchECS, definition.LaunchKubernetes}
}

// DefaultStartTimeout bounds each check a launcher process makes at start
// (the store, the ECS cluster) when it is given no bound of its own.
const DefaultStartTimeout = 20 * time.Second

// CheckTypes refuses a launch type that is not local, docker, ecs or kubernetes, naming
// it; a command says so (a usage error) before its other mistakes.
func CheckTypes(types []string) error {
	for _, t := range types {
		if !slices.Contains(Types(), t) {
			return fmt.Errorf("--types: %q is not a launch type: use local, docker, ecs or kubernetes", t)
		}
	}
	return nil
}

// IndexReader is the read CheckStore makes.
type IndexReader interface {
	ActivitiesInState(context.Context, state.ActivityQuery) ([]state.ActivityRef, error)
}

// CheckStore makes one read of the state index, bounded by timeout (0:
// DefaultStartTimeout), so that a store that cannot be reached stops a
// launcher at start with one line; where names the store in that line. A
// malformed item among those read does not stop it: one bad item must
// never stop the fleet. Nor does a store that answers but refuses the read
// once (DynamoDB's throttling, or a 500, still there after the SDK's own
// retries): it is tried again within the timeout.
func CheckStore(ctx context.Context, st IndexReader, where string, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxElapsedTime(0)), cctx)
	var last error
	err := backoff.Retry(func() error {
		_, err := st.ActivitiesInState(cctx, state.ActivityQuery{State: state.Ready, Limit: 1})
		// A READY item the store could not decode was read, so the store
		// is reachable; the store has reported the item, and passes skip
		// it.
		if _, err = state.Skipped(err); err == nil {
			return nil
		}
		last = err
		if errors.Is(err, state.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return backoff.Permanent(err) // unreachable, or not set up: say so now
		}
		return err
	}, b)
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("cannot reach the store (%s): %w", where, err)
	}
	return nil
}
