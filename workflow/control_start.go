package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// startControlled decides the activities of a new execution with control
// flow that wait on nothing (their when), once it is RUNNING, and settles
// it if every activity was skipped. If this dies before it is done, the
// monitor decides what is left (Decide).
func startControlled(ctx context.Context, st Starter, d *definition.Workflow, id string) error {
	log := hclog.NewNullLogger()
	g, err := graphOf(ctx, st, id)
	if err != nil {
		return fmt.Errorf("start %s: %w", d.Name, err)
	}
	for _, name := range d.Names() {
		if len(d.Activities[name].DependsOn) > 0 {
			continue
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			return fmt.Errorf("start %s: %w", d.Name, err)
		}
		got, err := decide(ctx, st, g, a, log)
		if err != nil {
			return fmt.Errorf("start %s: decide %s: %w", d.Name, name, err)
		}
		if got != nil && got.State.Terminal() {
			if _, err := advance(ctx, st, g, got, log); err != nil && !errors.Is(err, state.ErrConflict) {
				return fmt.Errorf("start %s: %w", d.Name, err)
			}
		}
	}
	return nil
}

// settleStarted settles a new execution with control flow whose
// activities all ended at its start (every one skipped), which no advance
// would otherwise settle.
func settleStarted(ctx context.Context, st Starter, id string) error {
	if _, err := Settle(ctx, st, id, nil); err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	return nil
}
