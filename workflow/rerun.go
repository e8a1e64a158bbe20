package workflow

import (
	"context"
	"fmt"
	"strings"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// Rerun starts a fresh execution of the definition stored with an earlier
// one. With fromFailure it redrives instead: the activities that completed
// in the earlier execution are recorded COMPLETED in the new one, pointing
// at the old ones, and only the rest run; a redrive needs an earlier
// execution that settled without completing.
func Rerun(ctx context.Context, st Starter, id string, fromFailure bool, opts StartOptions) (string, error) {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return "", fmt.Errorf("rerun %s: %w", id, err)
	}
	d, err := definition.FromJSON(wf.Definition)
	if err != nil {
		return "", fmt.Errorf("rerun %s: it has no definition Whimbrel can read (it was not started with whimbrel start): %w", id, err)
	}
	if opts.Params == nil {
		// The same parameters as the earlier execution: a rerun repeats it.
		if opts.Params, err = definition.StoredParams(wf.Params); err != nil {
			return "", fmt.Errorf("rerun %s: %w", id, err)
		}
	}
	if fromFailure {
		switch wf.State {
		case state.WorkflowCompleted:
			return "", fmt.Errorf("rerun %s --from-failure: it COMPLETED, so nothing is left to run; rerun it without --from-failure", id)
		case state.WorkflowRunning, state.WorkflowRequested:
			return "", fmt.Errorf("rerun %s --from-failure: it is still %s; wait for it to settle, or cancel it first", id, wf.State)
		}
		acts, err := st.Activities(ctx, id)
		// An activity that cannot be decoded is not carried over: it runs
		// again, which is what a rerun does anyway.
		if _, err := state.Skipped(err); err != nil {
			return "", fmt.Errorf("rerun %s: %w", id, err)
		}
		opts.Carry = map[string]*state.ActivityExec{}
		for _, a := range acts {
			if a.State == state.Completed && d.Activities[a.ActivityName] != nil && a.ItemIndex == nil {
				opts.Carry[a.ActivityName] = a
			}
		}
		opts.CarryMaps = carryMaps(d, id, opts.Carry)
	}
	// The source names the execution rerun, whoever asked, so that its
	// page can link to the reruns (RerunOf).
	source := rerunPrefix + id
	if fromFailure {
		source += " from its failure"
	}
	if opts.Source != "" {
		source += " (" + opts.Source + ")"
	}
	opts.Source = source
	if fromFailure && opts.RequestID == "" && !opts.Again {
		opts.RequestID = redriveRequestID(id) // redrive_once.go
	}
	newID, created, err := Start(ctx, st, d, opts)
	if err == nil && !created && fromFailure {
		return "", redriveOnce(ctx, st, id, newID)
	}
	return newID, err
}

// rerunPrefix starts the source of every execution Rerun starts.
const rerunPrefix = "rerun of "

// RerunOf returns the execution a rerun's source (Rerun) says it reruns.
func RerunOf(source string) (workflowExecID string, ok bool) {
	rest, ok := strings.CutPrefix(source, rerunPrefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, " ")
	return id, id != ""
}
