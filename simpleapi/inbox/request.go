package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// What the operator's commands do with the inbox (whimbrel register,
// whimbrel request): the client's side of the API, in Whimbrel's terms.

// Register writes (or replaces) a definition's registration: lambda names
// the processor that handles its requests and events ("": any).
func Register(ctx context.Context, in Inbox, def *definition.Workflow, lambda, source string) error {
	return in.Register(ctx, &state.WorkflowLambda{WorkflowName: def.Name, Lambda: lambda, Definition: def.JSON(),
		Registered: state.Truncate(time.Now()), Source: source})
}

// RequestOptions describe a request.
type RequestOptions struct {
	ID     string // the request's ID ("": a fresh one)
	Source string // who or what asks
	// Bind gives the parameters, checked against the registered
	// definition before anything is written (the processor checks them
	// again); nil: none. HasParams says whether any were given: a
	// registered definition that cannot be read is then refused, as
	// they cannot be checked.
	Bind      func(*definition.Workflow) (map[string]string, error)
	HasParams bool
}

// Request inserts a request to start a registered workflow and returns the
// execution a processor will start for it.
func Request(ctx context.Context, in Inbox, name string, o RequestOptions) (string, error) {
	reg, err := in.Registration(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return "", fmt.Errorf("workflow %q is not registered, so no processor could start it: run `whimbrel register FILE` first", name)
	}
	if err != nil {
		return "", err
	}
	id := o.ID
	if id == "" {
		id = state.NewWorkflowRequestID(name)
	}
	var params map[string]string
	if def, err := definition.FromJSON(reg.Definition); err == nil && o.Bind != nil {
		if params, err = o.Bind(def); err != nil {
			return "", err
		}
	} else if err != nil && o.HasParams {
		return "", fmt.Errorf("the registered definition of %q cannot be read, so its params cannot be checked: %w", name, err)
	}
	execID := state.WorkflowExecIDForRequest(name, id)
	r := &state.WorkflowRequest{WorkflowRequestID: id, WorkflowName: reg.WorkflowName, When: state.Truncate(time.Now()), Source: o.Source,
		Params: definition.EncodeParams(params)}
	if err := in.PutRequest(ctx, r); err != nil {
		if errors.Is(err, state.ErrExists) {
			return "", fmt.Errorf("%w: give another --request-id, or see `whimbrel status %s`", err, execID)
		}
		return "", err
	}
	return execID, nil
}
