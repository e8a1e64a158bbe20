package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
)

// firstLiveProbe is how many items AnyLive's first probe reads.
const firstLiveProbe = 4

// errLive stops AnyLive's reads at the first live activity.
var errLive = errors.New("a live activity")

// AnyLive reports whether any activity of the workflow is not terminal.
// It lists the keys through the workflow index (keys only), then reads
// the state alone of the items in random order, in probes that grow (4,
// 16, 64, then 100 at a time), and stops after the first probe that finds
// one live. DynamoDB charges every item a batch reads, so while most
// activities are live the answer costs about 4 item reads, not 100. The
// advance after each of a workflow's activities asks it before reading
// them all to settle, which for a fan-out of n cost n² item reads. An
// item whose state is missing or not the contract's counts as live, as
// listing it would not settle either.
func (st *Store) AnyLive(ctx context.Context, workflowExecID string) (bool, error) {
	keys, err := st.activityKeys(ctx, workflowExecID)
	if err != nil {
		return false, fmt.Errorf("look for live activities of %s: %w", workflowExecID, err)
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	live := func(m item) error {
		s, ok := m["state"].(*types.AttributeValueMemberS)
		if !ok || !state.ActivityState(s.Value).Terminal() {
			return errLive
		}
		return nil
	}
	for start, size := 0, firstLiveProbe; start < len(keys) && err == nil; start, size = start+size, size*4 {
		if size > 64 {
			size = len(keys) - start // batchGet reads them 100 at a time
		}
		err = st.batchGet(ctx, TableActivityExec, keys[start:min(start+size, len(keys))], live, "state")
	}
	switch {
	case errors.Is(err, errLive):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("look for live activities of %s: %w", workflowExecID, err)
	}
	return false, nil
}

// AnyLiveOf reports whether any of the given activities is not terminal,
// reading their states alone in one batch (up to 100 keys a call). An
// activity that does not exist is not counted; one whose state is missing
// or not the contract's counts as live, as in AnyLive.
func (st *Store) AnyLiveOf(ctx context.Context, keys []state.ActivityKey) (bool, error) {
	if len(keys) == 0 {
		return false, nil
	}
	items := make([]item, len(keys))
	for i, k := range keys {
		items[i] = item{"activity_exec_id": avS(k.ActivityExecID), "workflow_exec_id": avS(k.WorkflowExecID)}
	}
	err := st.batchGet(ctx, TableActivityExec, items, func(m item) error {
		s, ok := m["state"].(*types.AttributeValueMemberS)
		if !ok || !state.ActivityState(s.Value).Terminal() {
			return errLive
		}
		return nil
	}, "state")
	switch {
	case errors.Is(err, errLive):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("look for live activities among %d: %w", len(keys), err)
	}
	return false, nil
}
