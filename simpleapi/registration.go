package simpleapi

import (
	"context"
	"errors"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// registrationTTL is how long a processor trusts a registration it read.
const registrationTTL = 10 * time.Second

type cachedRegistration struct {
	reg  *state.WorkflowLambda // nil: not registered
	read time.Time
}

// registration reads a workflow's registration, through a short cache
// unless fresh is set; nil when the workflow is not registered.
func (p *Processor) registration(ctx context.Context, name string, fresh bool) (*state.WorkflowLambda, error) {
	p.mu.Lock()
	c, ok := p.regs[name]
	p.mu.Unlock()
	if ok && !fresh && time.Since(c.read) < registrationTTL {
		return c.reg, nil
	}
	reg, err := p.st.Registration(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		reg, err = nil, nil
	}
	if errors.Is(err, state.ErrInvalidItem) {
		// A registration nobody can read: its requests are rejected (no
		// usable definition), its events handled by any processor.
		p.log.Warn("the workflow's registration is malformed", "workflow_name", name, "error", err)
		reg, err = &state.WorkflowLambda{WorkflowName: name}, nil
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.regs[name] = cachedRegistration{reg: reg, read: time.Now()}
	p.mu.Unlock()
	return reg, nil
}

// mine reports whether this processor handles the workflow's records.
func (p *Processor) mine(reg *state.WorkflowLambda) bool {
	return reg == nil || reg.Lambda == "" || reg.Lambda == p.name
}
