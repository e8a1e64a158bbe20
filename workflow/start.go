package workflow

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// StartOptions configure Start.
type StartOptions struct {
	// RequestID identifies the request; a request ID starts at most one
	// execution. Empty: a fresh one.
	RequestID string
	// Source says who or what asked, for the record.
	Source string
	// RequestWritten says the request item exists already: a client of
	// the Simple Lambda API inserted it, and a processor starts it. Start
	// then writes only the execution, which the request ID still names.
	RequestWritten bool
	// Carry records these activities, by name, as COMPLETED in the new
	// execution before it runs, pointing at where they completed: a redrive
	// (see Rerun).
	Carry map[string]*state.ActivityExec
	// CarryMaps names, by for_each activity, the execution whose completed
	// elements the new execution's map records as COMPLETED instead of
	// running them again (a redrive inside a map).
	CarryMaps map[string]string
	// Params are the execution's parameters, checked against the
	// definition's declarations (definition.Workflow.Bind) before anything is
	// written.
	Params map[string]string
	// Again, for a redrive (Rerun with fromFailure), starts a new one even
	// when the execution was redriven before (see redriveOnce).
	Again bool
	// Parent links a child workflow's items to the activity that runs it
	// (see StartChild).
	Parent state.Parent
	// LaunchedHere says the caller launches the execution's activities
	// itself (whimbrel run): the launchers of the machine are not woken
	// for it (see wakeLaunchers), and find it only by their listing.
	LaunchedHere bool
}

// Start records a new execution of d — the request (manual, as the Full
// Logic API writes it), the workflow, every activity REQUESTED and the
// dependency items — then moves the workflow to RUNNING and the activities
// that wait on nothing to READY, for the launchers. It returns the
// execution's ID, and created=false when the request had already started
// it, in which case nothing is written.
//
// The execution ID is derived from the request ID, so a start that dies
// half-way is finished by repeating it with the same request ID.
func Start(ctx context.Context, st Starter, d *definition.Workflow, opts StartOptions) (id string, created bool, err error) {
	params, err := d.Bind(opts.Params)
	if err != nil {
		return "", false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	now := state.Truncate(clock.Now())
	reqID := opts.RequestID
	if reqID == "" {
		reqID = state.NewWorkflowRequestID(d.Name)
	}
	id = state.WorkflowExecIDForRequest(d.Name, reqID)
	w := &state.NewWorkflow{
		Request: &state.WorkflowRequest{WorkflowRequestID: reqID, WorkflowName: d.Name, When: now,
			Source: opts.Source, Manual: true, WorkflowExecID: id},
		Exec: state.WorkflowExec{WorkflowExecID: id, WorkflowName: d.Name, State: state.WorkflowRequested,
			WorkflowRequestID: reqID, StartTime: now, Source: opts.Source, Definition: d.JSON(),
			Params: definition.EncodeParams(params), Parent: opts.Parent},
	}
	if opts.RequestWritten {
		w.Request = nil
	}
	for _, name := range d.Names() {
		aid := state.ActivityExecIDFor(id, name)
		act := state.ActivityExec{
			ActivityKey:  state.ActivityKey{ActivityExecID: aid, WorkflowExecID: id},
			WorkflowName: d.Name, ActivityName: name, State: state.Requested, StateTime: now,
			Parent: opts.Parent,
		}
		for i, up := range d.Activities[name].DependsOn {
			upID := state.ActivityExecIDFor(id, up)
			act.PendingDependencies = append(act.PendingDependencies, upID)
			w.Dependencies = append(w.Dependencies, state.Dependency{ID: state.DependencyID(aid, i),
				ActivityExecID: aid, WorkflowExecID: id, DependentActivityExecID: upID})
		}
		w.Activities = append(w.Activities, act)
	}

	err = st.CreateWorkflow(ctx, w)
	var ee *state.ExistsError
	switch {
	case errors.As(err, &ee) && ee.WorkflowExecID != "":
		return ee.WorkflowExecID, false, nil
	case err != nil:
		return "", false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	// While the workflow is REQUESTED nobody launches its activities, so
	// the carried ones can be walked to COMPLETED here.
	if err := carryElements(ctx, st, id, opts.CarryMaps); err != nil {
		return "", false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	if err := carry(ctx, st, d, id, opts.Carry); err != nil {
		return "", false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	if d.Controlled() {
		// Likewise the activities that wait on nothing are decided
		// (control_start.go) before any launcher may take them.
		if err := startControlled(ctx, st, d, id); err != nil {
			return "", false, err
		}
	}
	if err := watch(ctx, st, d, id, now); err != nil {
		return "", false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	// A workflow with max_active_runs may wait here, REQUESTED, for a
	// running slot (runs.go); whoever ends a run starts it later.
	if _, err := begin(ctx, st, d, &w.Exec, !opts.LaunchedHere); err != nil {
		return "", false, err
	}
	return id, true, nil
}

// carry records activities that completed in an earlier execution as
// COMPLETED in this one, dependencies first, through the contract's own
// moves, and advances past each. Repeating it skips what is done.
func carry(ctx context.Context, st Starter, d *definition.Workflow, id string, done map[string]*state.ActivityExec) error {
	for _, name := range d.Names() {
		old := done[name]
		if old == nil {
			continue
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			return err
		}
		owner := "carried-from:" + old.ActivityExecID
		steps := []state.ActivityChange{
			{From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: "completed in " + old.WorkflowExecID},
			{From: []state.ActivityState{state.Ready}, To: state.Running, Claim: &state.Claim{Owner: owner, Host: old.Host}},
			{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner, Exit: &state.Exit{Code: 0}, Output: old.Output, Skipped: old.Skipped,
				LaunchedAs: "carried from " + old.ActivityExecID, Reason: "completed in " + old.WorkflowExecID + " as " + old.ActivityExecID,
				Swap: carriedMap(a, old)},
		}
		for _, c := range steps {
			if a.State != c.From[0] {
				continue
			}
			if a, err = st.UpdateActivity(ctx, k, c); err != nil {
				return fmt.Errorf("carry %s: %w", name, err)
			}
		}
		if a.State != state.Completed {
			return fmt.Errorf("carry %s: it is %s, not COMPLETED", name, a.State)
		}
		if _, err := Advance(ctx, st, a, nil); err != nil {
			return fmt.Errorf("carry %s: %w", name, err)
		}
	}
	return nil
}

// begin moves a REQUESTED execution to RUNNING, once it holds a running
// slot when its workflow has max_active_runs, and readies the activities
// that wait on nothing. It reports false, writing nothing, when the
// execution waits for a slot.
func begin(ctx context.Context, st Starter, d *definition.Workflow, wf *state.WorkflowExec, wake bool) (bool, error) {
	id := wf.WorkflowExecID
	if why, err := admitRun(ctx, st, d, wf); err != nil || why != "" {
		return false, err
	}
	_, err := st.UpdateWorkflow(ctx, id, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning,
	})
	if err != nil && !errors.Is(err, state.ErrConflict) { // a concurrent start of the same request moved it
		return false, fmt.Errorf("start %s: %w", d.Name, err)
	}
	if err != nil && d.MaxActiveRuns() > 0 {
		// Cancelled while it waited: its slot goes back (runs.go).
		if now, gerr := st.GetWorkflow(ctx, id); gerr == nil && now.State.Terminal() {
			runEnded(ctx, st, now, hclog.NewNullLogger())
			return true, nil
		}
	}
	// However the start ends, the launchers of a store that can tell them
	// hear of it now rather than at their next listing.
	if wake {
		defer wakeLaunchers(st)
	}
	if d.Controlled() {
		return true, settleStarted(ctx, st, id) // control_start.go
	}
	// The activities that wait on nothing are ready now. If this dies
	// before it is done, the monitor readies what is left.
	for _, name := range d.Names() {
		if len(d.Activities[name].DependsOn) > 0 {
			continue
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
		if d.Activities[name].ForEach != nil {
			if err := openMapAtStart(ctx, st, k); err != nil {
				return false, fmt.Errorf("start %s: %w", d.Name, err)
			}
			continue
		}
		_, err := st.UpdateActivity(ctx, k, state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: "it waits on nothing",
		})
		if err != nil && !errors.Is(err, state.ErrConflict) {
			return false, fmt.Errorf("start %s: ready %s: %w", d.Name, name, err)
		}
	}
	return true, nil
}
