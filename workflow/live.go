package workflow

import (
	"context"
	"fmt"
)

// liveFinder is a store that tells, without reading a workflow's
// activities, whether any of them is not terminal (the embedded store,
// through an index). Every activity's advance settles the workflow when
// nothing else is left; without it, each reads all the activities, and a
// fan-out of n costs n² item reads.
type liveFinder interface {
	AnyLive(ctx context.Context, workflowExecID string) (bool, error)
}

// surelyLive reports whether st can tell cheaply that the workflow has an
// activity that is not terminal: then settling it now would find it not
// done. false means it cannot tell, or found none: the caller reads them.
func surelyLive(ctx context.Context, st Reader, workflowExecID string) (bool, error) {
	lf, ok := st.(liveFinder)
	if !ok {
		return false, nil
	}
	live, err := lf.AnyLive(ctx, workflowExecID)
	if err != nil {
		return false, fmt.Errorf("settle %s: %w", workflowExecID, err)
	}
	return live, nil
}
