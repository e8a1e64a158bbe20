package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// A child workflow (docs/sub-workflows.md) is an ordinary execution that
// one attempt of a parent activity runs. Its life, in conditional writes:
//
//  1. a launcher claims the parent activity READY → QUEUED, as any;
//  2. StartChild moves it QUEUED → RUNNING, held by the child's owner
//     token (state.ChildOwner), heartbeats off, launched_as the child's
//     ID: no process runs it, so nothing may time it out;
//  3. StartChild starts the child under a request ID derived from the
//     parent (state.ChildRequestID): any number of starters make one
//     child;
//  4. the write that settles the child is followed, by the same
//     participant, by FinishParent: the parent activity ends with the
//     child's outcome (and its outputs), and the parent is advanced.
//
// A participant that dies between two of these leaves a RUNNING parent
// activity held by a child that is missing or settled; the monitor
// repeats StartChild or FinishParent (docs/contract.md#child-workflows).

// ChildIndex is the index a child's request ID is derived with for an
// activity that maps nothing.
const ChildIndex = -1

// childIndexOf is the index in its map of the item a child is started
// for, which the child's request ID is derived with: every starter (the
// launcher, the monitor's repair) derives the same. An activity that maps
// nothing has ChildIndex.
func childIndexOf(a *state.ActivityExec) int {
	if a.ItemIndex != nil {
		return *a.ItemIndex
	}
	return ChildIndex
}

// StartChild starts the child workflow that activity a of execution wf
// runs. a is QUEUED under a launcher's hold (its claim) or RUNNING held by
// its child (a repair). A problem with the activity's data or the child's
// definition fails the activity, and the parent is advanced; a store
// error is returned, and the call can be repeated. It returns the child's
// execution ID.
func StartChild(ctx context.Context, st Starter, wf *state.WorkflowExec, a *state.ActivityExec, log hclog.Logger) (string, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	child, params, problem := childOf(ctx, st, wf, a)
	if problem != nil && child == nil {
		return "", failParent(ctx, st, a, problem, log)
	}
	attempt := max(a.Attempt, 1)
	reqID := state.ChildRequestID(child.Name, wf.WorkflowExecID, a.ActivityExecID, childIndexOf(a), attempt)
	id := state.WorkflowExecIDForRequest(child.Name, reqID)
	if a.State == state.Queued {
		claimed, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
			From: []state.ActivityState{state.Queued}, To: state.Running, Owner: a.Owner,
			Claim: &state.Claim{Owner: state.ChildOwner(id)}, LaunchedAs: id,
			Reason: "running child workflow " + id,
		})
		if errors.Is(err, state.ErrConflict) {
			return id, nil // no longer the launcher's: cancelled, or failed by the monitor
		}
		if err != nil {
			return "", fmt.Errorf("claim %s for child %s: %w", a.ActivityExecID, id, err)
		}
		a = claimed
	}
	if owner, ok := state.ChildOf(a); a.State != state.Running || !ok || owner != id {
		return id, nil // ended, or cancelled: no child to start
	}
	if problem != nil {
		return id, failParent(ctx, st, a, problem, log)
	}
	_, created, err := Start(ctx, st, child, StartOptions{
		RequestID: reqID, Source: "workflow " + wf.WorkflowExecID + " activity " + a.ActivityExecID,
		Params: params, Parent: state.Parent{ParentWorkflowExecID: wf.WorkflowExecID, ParentActivityExecID: a.ActivityExecID},
	})
	if err != nil {
		return id, err
	}
	if created {
		log.Info("started child workflow", "activity_exec_id", a.ActivityExecID, "child", id)
		return id, nil
	}
	// Started before (this is a repair): it may have settled while its
	// parent's end was not recorded.
	cw, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return id, err
	}
	return id, FinishParent(ctx, st, cw, log)
}

// childOf reads the child definition and resolves the params activity a
// hands it. A problem that concerns the child's params only comes with
// the definition; one that leaves no definition, without.
func childOf(ctx context.Context, st Advancer, wf *state.WorkflowExec, a *state.ActivityExec) (*definition.Workflow, map[string]string, error) {
	d, err := definition.ReadStored(wf.Definition)
	if err != nil {
		return nil, nil, err
	}
	act, err := d.Activity(a.ActivityName)
	if err != nil {
		return nil, nil, err
	}
	if !act.IsChild() {
		return nil, nil, fmt.Errorf("activity %q runs no workflow", a.ActivityName)
	}
	child := act.Workflow.Definition
	if child == nil {
		ref := act.Workflow.File
		if ref == "" {
			ref = "registered workflow " + act.Workflow.Name
		}
		return nil, nil, fmt.Errorf("the definition of %s was not stored with the parent: start the parent with whimbrel start or run, which store it", ref)
	}
	params, err := definition.StoredParams(wf.Params)
	if err != nil {
		return child, nil, err
	}
	dt := definition.Data{Params: params, Outputs: map[string]json.RawMessage{}}
	if a.ItemIndex != nil {
		// An element of a for_each map: its child's params may name it.
		item := a.Item
		if item == "" {
			item = "null"
		}
		dt.Element, dt.Index = json.RawMessage(item), *a.ItemIndex
	}
	for _, up := range act.DependsOn {
		out, err := finalOutput(ctx, st, wf.WorkflowExecID, up)
		if err != nil {
			return child, nil, err
		}
		if out != "" && json.Valid([]byte(out)) {
			dt.Outputs[up] = json.RawMessage(out)
		}
	}
	p, err := act.ChildParams(dt)
	if err == nil {
		// Checked here, so that a child refused by its own definition
		// fails its parent activity rather than the start.
		_, err = child.Bind(p)
	}
	return child, p, err
}

// finalOutput is the output of the final attempt of the named activity,
// followed from its first by the retried_by links with consistent reads
// (an index may not list the last attempt yet).
func finalOutput(ctx context.Context, st Advancer, workflowExecID, name string) (string, error) {
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(workflowExecID, name), WorkflowExecID: workflowExecID}
	for range maxAttempts {
		a, err := st.GetActivity(ctx, k)
		if errors.Is(err, state.ErrNotFound) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("read the output of %s: %w", name, err)
		}
		if a.RetriedBy == "" {
			return a.Output, nil
		}
		k.ActivityExecID = a.RetriedBy
	}
	return "", nil
}

// maxAttempts bounds a walk along retried_by links, against a loop of
// links another client wrote.
const maxAttempts = 100

// failParent fails a parent activity that cannot run its child, and
// advances the parent (which may retry it).
func failParent(ctx context.Context, st Advancer, a *state.ActivityExec, cause error, log hclog.Logger) error {
	msg := "child workflow: " + cause.Error()
	failed, err := st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{
		From: []state.ActivityState{a.State}, To: state.Failed, Owner: a.Owner,
		Exit: &state.Exit{Code: 1}, Error: msg, Reason: msg,
	})
	if errors.Is(err, state.ErrConflict) {
		return nil // ended or cancelled meanwhile
	}
	if err != nil {
		return fmt.Errorf("fail %s: %w", a.ActivityExecID, err)
	}
	log.Warn("child workflow not started", "activity_exec_id", a.ActivityExecID, "error", cause)
	_, err = Advance(ctx, st, failed, log)
	return err
}

// FinishParent ends the parent activity of a settled child workflow with
// the child's outcome: COMPLETED with the child's outputs when it
// completed, FAILED otherwise; then advances the parent. The write is
// fenced by the child's owner token, so it lands once, and only while the
// parent activity is still RUNNING for this child (not cancelled, not run
// by another attempt). A workflow that is nobody's child, or has not
// settled, is left alone.
func FinishParent(ctx context.Context, st Advancer, child *state.WorkflowExec, log hclog.Logger) error {
	if child == nil || child.ParentActivityExecID == "" || !child.State.Terminal() {
		return nil
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	k := child.Parent.Key()
	parent, err := st.GetActivity(ctx, k)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finish parent %s: %w", k.ActivityExecID, err)
	}
	if owner, ok := state.ChildOf(parent); parent.State != state.Running || !ok || owner != child.WorkflowExecID {
		return nil
	}
	c := state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: parent.Owner}
	why := fmt.Sprintf("child workflow %s %s", child.WorkflowExecID, child.State)
	if child.Reason != "" {
		why += ": " + child.Reason
	}
	if child.State == state.WorkflowCompleted {
		out, err := childOutput(ctx, st, child)
		if err == nil && len(out) > state.MaxOutput {
			err = fmt.Errorf("they are %d bytes, more than an output may be (%d)", len(out), state.MaxOutput)
		}
		if err != nil {
			c.To, c.Exit, c.Error, c.Reason = state.Failed, &state.Exit{Code: 1}, "child workflow outputs: "+err.Error(), why
		} else {
			c.To, c.Exit, c.Output, c.Reason = state.Completed, &state.Exit{Code: 0}, out, why
		}
	} else {
		c.To, c.Exit, c.Error, c.Reason = state.Failed, &state.Exit{Code: 1}, why, why
	}
	ended, err := st.UpdateActivity(ctx, k, c)
	if errors.Is(err, state.ErrConflict) {
		return nil // ended by another participant, who advances
	}
	if err != nil {
		return fmt.Errorf("finish parent %s: %w", k.ActivityExecID, err)
	}
	log.Info("child workflow settled its parent activity", "activity_exec_id", k.ActivityExecID, "state", ended.State)
	if _, err := Advance(ctx, st, ended, log); err != nil {
		return fmt.Errorf("finish parent %s: %w", k.ActivityExecID, err)
	}
	return nil
}

// childOutput resolves the child's declared outputs against its
// parameters and its activities' final outputs.
func childOutput(ctx context.Context, st Advancer, child *state.WorkflowExec) (string, error) {
	d, err := definition.ReadStored(child.Definition)
	if err != nil {
		return "", err
	}
	params, err := definition.StoredParams(child.Params)
	if err != nil {
		return "", err
	}
	dt := definition.Data{Params: params, Outputs: map[string]json.RawMessage{}}
	for _, name := range d.OutputRefs() {
		out, err := finalOutput(ctx, st, child.WorkflowExecID, name)
		if err != nil {
			return "", err
		}
		if out != "" && json.Valid([]byte(out)) {
			dt.Outputs[name] = json.RawMessage(out)
		}
	}
	return d.ChildOutput(dt)
}

// finishAfterSettle is the settling write's follow-up: the participant
// that settled a child workflow ends its parent activity. A store that
// cannot advance leaves it to the monitor.
func finishAfterSettle(ctx context.Context, st any, settled *state.WorkflowExec, log hclog.Logger) {
	runEnded(ctx, st, settled, log) // runs.go
	if settled == nil || settled.ParentActivityExecID == "" {
		return
	}
	adv, ok := st.(Advancer)
	if !ok {
		return
	}
	if err := FinishParent(ctx, adv, settled, log); err != nil {
		log.Warn("ending the parent activity of a settled child workflow failed; the monitor will", "workflow_exec_id", settled.WorkflowExecID, "error", err)
	}
}

// cancelChild cancels the child workflow that a cancelled parent activity
// ran: cancel goes down.
func cancelChild(ctx context.Context, st Canceller, a *state.ActivityExec, why string, log hclog.Logger) {
	id, ok := state.ChildOf(a)
	if !ok {
		return
	}
	_, err := Cancel(ctx, st, id, "parent activity "+a.ActivityExecID+" cancelled: "+why, log)
	var ce *state.ConflictError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, state.ErrNotFound) {
		log.Warn("cancelling a child workflow failed; the monitor will", "child", id, "error", err)
	}
}

// CancelChild cancels the child workflow held by activity a, if any, when
// a has been cancelled (CANCELLED_RUNNING); the monitor calls it after its
// own cancel of a running activity.
func CancelChild(ctx context.Context, st Canceller, a *state.ActivityExec, why string, log hclog.Logger) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cancelChild(ctx, st, a, why, log)
}

// Family says which executions a monitor or launcher limited to one
// workflow (whimbrel run's) looks after: that one and its child
// workflows, down the tree. A workflow's parent never changes, so each
// answer is kept. A Family is safe for concurrent use.
type Family struct {
	root string
	mu   sync.Mutex
	in   map[string]bool
}

// NewFamily returns the family of execution root; an empty root is every
// execution's.
func NewFamily(root string) *Family { return &Family{root: root, in: map[string]bool{root: true}} }

// Has reports whether execution id is the root or a child of it, reading
// at most definition.DefaultMaxDepth workflow items up its parents.
func (sc *Family) Has(ctx context.Context, st Getter, id string) bool {
	if sc == nil || sc.root == "" {
		return true
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if in, ok := sc.in[id]; ok {
		return in
	}
	cur, in := id, false
	for range definition.DefaultMaxDepth + 1 {
		wf, err := st.GetWorkflow(ctx, cur)
		if err != nil {
			return false // not kept: the next sweep asks again
		}
		if wf.ParentWorkflowExecID == "" {
			break
		}
		cur = wf.ParentWorkflowExecID
		if v, ok := sc.in[cur]; ok {
			in = v
			break
		}
	}
	sc.in[id] = in
	return in
}
