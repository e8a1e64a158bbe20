package simpleapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// startGrace is how long a request whose start another processor claimed
// may stay unstarted before this one finishes the start; startRecovery is
// how old such a claim may be for that (an older one's execution was
// started and has expired since).
const (
	startGrace    = 30 * time.Second
	startRecovery = time.Hour
)

// ProcessRequest starts the registered workflow a request names, once: the
// processor that records the outcome "started" first starts the execution
// (whose ID the request's derives) and logs it; any other finds the
// outcome and only makes sure the start finished.
//
// It returns nil when the request is done or is none of this processor's
// business, a *MalformedError when it must be skipped, and any other error
// when it should be retried.
func (p *Processor) ProcessRequest(ctx context.Context, r *state.WorkflowRequest) error {
	log := p.log.With("workflow_request_id", r.WorkflowRequestID, "workflow_name", r.WorkflowName)
	if r.Manual {
		log.Debug("a manual request: the Full Logic API started it")
		return p.ignoreRequest(ctx, r)
	}
	// Read fresh: the workflow may have been registered a moment ago.
	reg, err := p.registration(ctx, r.WorkflowName, true)
	if err != nil {
		return fmt.Errorf("request %s: %w", r.WorkflowRequestID, err)
	}
	if !p.mine(reg) {
		log.Debug("another function handles this workflow", "lambda", reg.Lambda)
		return nil
	}
	// A request already decided (a record delivered again) is left alone.
	cur, err := p.st.GetRequest(ctx, r.WorkflowRequestID, r.WorkflowName)
	switch {
	case errors.Is(err, state.ErrNotFound):
		log.Debug("the request is gone (expired); nothing to do")
		return nil
	case errors.Is(err, state.ErrInvalidItem):
		return &MalformedError{Record: r.WorkflowRequestID, Err: err}
	case err != nil:
		return fmt.Errorf("request %s: %w", r.WorkflowRequestID, err)
	}
	id := state.WorkflowExecIDForRequest(r.WorkflowName, r.WorkflowRequestID)
	if cur.Outcome.Processed() {
		return p.finishStart(ctx, cur, reg, id, log)
	}
	if reg == nil || reg.Definition == "" {
		return p.rejectRequest(ctx, r, fmt.Sprintf("workflow %q is not registered: run `whimbrel register FILE` with its definition, then insert a new request", r.WorkflowName))
	}
	def, err := p.definition(reg, r.WorkflowName)
	if err != nil {
		return p.rejectRequest(ctx, r, err.Error())
	}
	if err := checkParams(def, cur); err != nil {
		return p.rejectRequest(ctx, r, err.Error())
	}
	// Claim the start: only the first outcome recorded stands.
	o := state.Outcome{Result: state.OutcomeStarted, Reason: "started " + id, At: state.Truncate(time.Now())}
	err = p.st.RecordRequest(ctx, r.WorkflowRequestID, r.WorkflowName, id, o)
	switch {
	case errors.Is(err, state.ErrConflict):
		cur, err := p.st.GetRequest(ctx, r.WorkflowRequestID, r.WorkflowName)
		if err != nil {
			return fmt.Errorf("request %s: %w", r.WorkflowRequestID, err)
		}
		return p.finishStart(ctx, cur, reg, id, log)
	case errors.Is(err, state.ErrNotFound):
		return nil // expired meanwhile
	case err != nil:
		return fmt.Errorf("request %s: record its outcome: %w", r.WorkflowRequestID, err)
	}
	_, created, err := workflow.Start(ctx, p.st, def, p.startOptions(r))
	switch {
	case err != nil:
		// Retried, this record finds the claim and finishes the start
		// once startGrace has passed.
		return fmt.Errorf("request %s: %w", r.WorkflowRequestID, err)
	case created:
		log.Info("started", "workflow_exec_id", id)
	default:
		// The request was written again after its outcome was wiped.
		log.Debug("started before", "workflow_exec_id", id)
	}
	return nil
}

func (p *Processor) startOptions(r *state.WorkflowRequest) workflow.StartOptions {
	source := "workflow_request"
	if r.Source != "" {
		source += " from " + r.Source
	}
	// Parameters that do not read were refused before the start was
	// claimed (see request): none here.
	params, _ := definition.StoredParams(r.Params)
	return workflow.StartOptions{RequestID: r.WorkflowRequestID, Source: source, RequestWritten: true, Params: params}
}

// checkParams refuses, before anything is written, a request whose
// parameters do not read or do not fit the definition's declarations.
func checkParams(def *definition.Workflow, r *state.WorkflowRequest) error {
	params, err := definition.StoredParams(r.Params)
	if err != nil {
		return err
	}
	_, err = def.Bind(params)
	return err
}

// checkOutput refuses an output that is not a JSON object within
// state.MaxOutput bytes.
func checkOutput(s string) error {
	if len(s) > state.MaxOutput {
		return fmt.Errorf("the output is %d bytes; at most %d (32 KiB) are recorded: pass big data by reference", len(s), state.MaxOutput)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return fmt.Errorf("the output is not a JSON object")
	}
	return nil
}

// definition parses a registered definition, or says why it cannot be used.
func (p *Processor) definition(reg *state.WorkflowLambda, name string) (*definition.Workflow, error) {
	def, err := definition.FromJSON(reg.Definition)
	if err == nil && def.Name != name {
		err = fmt.Errorf("it defines workflow %q", def.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("the registered definition of %q cannot be used: %v; register it again", name, err)
	}
	return def, nil
}

// finishStart handles a request some processor decided already. One that
// claimed the start may have died before it finished: once startGrace has
// passed, the start is finished here (workflow.Start finishes a half-done
// start, and writes nothing when the execution is past REQUESTED).
func (p *Processor) finishStart(ctx context.Context, cur *state.WorkflowRequest, reg *state.WorkflowLambda, id string, log hclog.Logger) error {
	if cur.Outcome.Result != state.OutcomeStarted {
		log.Debug("already decided", "outcome", cur.Outcome.Result)
		return nil
	}
	wf, err := p.st.GetWorkflow(ctx, id)
	switch {
	case err == nil && wf.State != state.WorkflowRequested:
		log.Debug("started before", "workflow_exec_id", id)
		return nil
	case err != nil && !errors.Is(err, state.ErrNotFound):
		return fmt.Errorf("request %s: %w", cur.WorkflowRequestID, err)
	}
	age := time.Since(cur.Outcome.At)
	switch {
	case err != nil && age > startRecovery:
		log.Debug("started long ago; its execution is gone (expired)", "workflow_exec_id", id)
		return nil
	case age < startGrace:
		return fmt.Errorf("request %s: %w (another processor is starting %s)", cur.WorkflowRequestID, ErrTooEarly, id)
	case reg == nil || reg.Definition == "":
		log.Warn("a start was left half-done, and the workflow is no longer registered", "workflow_exec_id", id)
		return nil
	}
	def, err := p.definition(reg, cur.WorkflowName)
	if err != nil {
		log.Warn("a start was left half-done, and the registered definition cannot be used", "workflow_exec_id", id, "error", err)
		return nil
	}
	if _, _, err := workflow.Start(ctx, p.st, def, p.startOptions(cur)); err != nil {
		return fmt.Errorf("request %s: %w", cur.WorkflowRequestID, err)
	}
	log.Info("finished a start another processor left half-done", "workflow_exec_id", id)
	return nil
}

func (p *Processor) ignoreRequest(ctx context.Context, r *state.WorkflowRequest) error {
	o := state.Outcome{Result: state.OutcomeIgnored, Reason: "manual: the Full Logic API acts on it", At: state.Truncate(time.Now())}
	err := p.st.RecordRequest(ctx, r.WorkflowRequestID, r.WorkflowName, "", o)
	if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("request %s: record its outcome: %w", r.WorkflowRequestID, err)
	}
	return nil
}

func (p *Processor) rejectRequest(ctx context.Context, r *state.WorkflowRequest, why string) error {
	p.log.Warn("request rejected", "workflow_request_id", r.WorkflowRequestID, "why", why)
	err := p.st.RecordRequest(ctx, r.WorkflowRequestID, r.WorkflowName, "", state.Rejected("%s", why))
	if err != nil && !errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("request %s: record its rejection: %w", r.WorkflowRequestID, err)
	}
	return nil
}
