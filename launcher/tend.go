package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Tender is implemented by a backend that looks after what it started
// for as long as the launcher runs (launcher/kubernetes: it deletes the
// Jobs of cancelled activities, and fails those whose pod never starts
// with the reason the cluster gives). Tend runs until ctx ends; the
// launcher's Run starts it and waits for it before returning.
type Tender interface {
	Tend(ctx context.Context, s Tending)
}

// Tending is what a Tender may do with the store: read an activity, and
// fail one that was launched but never started.
type Tending interface {
	GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error)
	// FailQueued fails the activity if it is still QUEUED or PREPARING,
	// with reason, and advances its workflow. It returns false, with no
	// error, when the activity had moved on (its wrapper claimed it).
	FailQueued(ctx context.Context, k state.ActivityKey, reason string) (bool, error)
}

// tending is the launcher's Tending.
type tending struct{ l *Launcher }

func (t tending) GetActivity(ctx context.Context, k state.ActivityKey) (*state.ActivityExec, error) {
	return t.l.st.GetActivity(ctx, k)
}

func (t tending) FailQueued(ctx context.Context, k state.ActivityKey, reason string) (bool, error) {
	failed, err := t.l.st.UpdateActivity(ctx, k, state.ActivityChange{
		From: []state.ActivityState{state.Queued, state.Preparing}, To: state.Failed, Error: reason, Reason: "launch failed: " + reason,
	})
	if errors.Is(err, state.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fail the launch of %s: %w", k.ActivityExecID, err)
	}
	if _, err := workflow.Advance(ctx, t.l.st, failed, t.l.log.Named("advance")); err != nil {
		t.l.log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
	}
	return true, nil
}

// startTenders starts the Tend of each backend that has one, and returns
// what waits for them to stop (they stop when ctx ends).
func (l *Launcher) startTenders(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, b := range l.cfg.Backends {
		if t, ok := b.(Tender); ok {
			wg.Go(func() { t.Tend(ctx, tending{l}) })
		}
	}
	return wg.Wait
}
