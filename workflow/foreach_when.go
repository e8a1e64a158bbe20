package workflow

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// openDecided opens a map of a workflow with control flow once its
// trigger rule and its when (if it reads no element) let it run: its move
// out of REQUESTED is its listing, as without control flow, not a move to
// READY that a launcher would take for one command. It returns the map as
// decide reports an activity: marked readied here when this call wrote
// elements, or the map as it stands (RUNNING, or final when its list was
// empty or could not be made, advanced past already).
func openDecided(ctx context.Context, st Advancer, g graph, k *state.ActivityExec, log hclog.Logger) (*state.ActivityExec, error) {
	res, err := openMap(ctx, st, g, k, log)
	if err != nil {
		return nil, err
	}
	m, err := st.GetActivity(ctx, k.ActivityKey)
	if err != nil {
		return nil, fmt.Errorf("decide %s: %w", k.ActivityExecID, err)
	}
	if len(res.Readied) > 0 && !m.State.Terminal() {
		mine := *m
		mine.State, mine.Reason = state.Ready, readiedHere
		return &mine, nil
	}
	return m, nil
}
