package monitor

import (
	"context"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// skipped counts what a listing skipped because it could not be decoded
// (the store reported each item) and returns any other error.
func (s *sweep) skipped(err error) error {
	bad, err := state.Skipped(err)
	s.report.Undecodable += len(bad)
	return err
}

// workflow reads a workflow once per sweep.
func (s *sweep) workflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	if wf := s.workflows[id]; wf != nil {
		return wf, nil
	}
	wf, err := s.st.GetWorkflow(ctx, id)
	if err != nil {
		return nil, err
	}
	s.workflows[id] = wf
	return wf, nil
}

// definition parses a workflow's stored definition once per sweep; nil if
// it has none (a workflow started by a foreign client) or it cannot be read.
func (s *sweep) definition(ctx context.Context, id string) *definition.Workflow {
	if d, ok := s.defs[id]; ok {
		return d
	}
	var d *definition.Workflow
	wf, err := s.workflow(ctx, id)
	if err != nil {
		s.log.Warn("could not read a workflow's definition; using defaults", "workflow_exec_id", id, "error", err)
		return nil // not cached: the next look may succeed
	}
	if wf.Definition != "" {
		var err error
		if d, err = definition.FromJSON(wf.Definition); err != nil {
			s.log.Warn("stored definition unreadable; using defaults", "workflow_exec_id", id, "error", err)
			d = nil
		}
	}
	s.defs[id] = d
	return d
}
