package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// Getter is the part of the store Wait reads.
type Getter interface {
	GetWorkflow(ctx context.Context, workflowExecID string) (*state.WorkflowExec, error)
}

// Wait reads workflow id every interval until it has settled, and returns
// it. A workflow not written yet (a request a processor has not started)
// is waited for too, and a passing store error is logged, not returned:
// only ctx ends the wait early. every must be positive.
func Wait(ctx context.Context, st Getter, id string, every time.Duration, log hclog.Logger) (*state.WorkflowExec, error) {
	if every <= 0 {
		return nil, fmt.Errorf("wait for workflow %s: the interval between reads must be positive, not %s", id, every)
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		wf, err := st.GetWorkflow(ctx, id)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			log.Warn("reading the workflow failed; trying again", "error", err)
		}
		if err == nil && wf.State.Terminal() {
			return wf, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("stopped waiting for workflow %s", id)
			}
			return nil, fmt.Errorf("stopped waiting; workflow %s is still %s", id, wf.State)
		case <-t.C:
		}
	}
}
