package web

import (
	"context"
	"fmt"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// maxReruns bounds the executions of a workflow read to find an
// execution's reruns: those started since it, newest first.
const maxReruns = 200

// loadReruns finds the executions started as reruns of wf (whimbrel rerun,
// the pages' Rerun buttons), newest first, so that a failed execution's
// page links to its redrive. Only an execution that settled without
// completing is looked up: it is the one a person reruns.
func (s *Server) loadReruns(ctx context.Context, wf inspect.Workflow) ([]string, error) {
	if wf.State != state.WorkflowFailed && wf.State != state.WorkflowCancelled {
		return nil, nil
	}
	v, _, err := s.reads.get(ctx, "reruns "+wf.ID, func(ctx context.Context) (any, bool, error) {
		q := state.WorkflowQuery{Name: wf.Name, Limit: maxReruns}
		if wf.Started != nil {
			q.Since = *wf.Started
		}
		wfs, err := s.opts.Store.Workflows(ctx, q)
		if _, err = state.Skipped(err); err != nil { // one that cannot be decoded is reported by the store
			return nil, false, fmt.Errorf("read the reruns of %s: %w", wf.ID, err)
		}
		var ids []string
		for _, w := range wfs {
			if of, ok := workflow.RerunOf(w.Source); ok && of == wf.ID {
				ids = append(ids, w.WorkflowExecID)
			}
		}
		return ids, false, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]string), nil
}
