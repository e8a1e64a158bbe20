// Package simpleapi is the Simple Lambda API of seed 001: clients only
// insert items — a workflow_request to start a workflow, an activity_event
// to move an activity — and a processor reading the two tables' DynamoDB
// streams does the rest with the Full Logic API's code (package workflow).
//
// The Processor applies one stream record. It runs inside a Lambda
// function (LambdaHandler, cmd/whimbrel-lambda) or a long-running Poller
// (cmd/whimbrel-poller). Either way every record may arrive twice, late or
// out of order, and any number of processors may run: a request starts
// the execution its ID derives, so a repeat finds it started; an event is
// decided by a conditional write that moves its activity's event cursor,
// so it is decided once, and only after every earlier event (by when) of
// the same activity.
package simpleapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a processor needs of a store.
type Store interface {
	state.Store
	state.Inbox
}

// DefaultOrderWindow is how long the commands retry an event whose
// transition cannot be applied yet before they reject it: an earlier event
// of the same activity may still be on its way (the events index is
// eventually consistent).
const DefaultOrderWindow = 5 * time.Second

// registrationTTL is how long a processor trusts a registration it read.
const registrationTTL = 10 * time.Second

// Config configures a Processor.
type Config struct {
	Store Store
	// Name is this processor's name: the Lambda function's, or the
	// poller's. A workflow registered with a function (workflow_lambda's
	// lambda) is handled only by the processor of that name; one
	// registered without, or not registered, by any.
	Name string
	// OrderWindow: an event younger than this that cannot be applied is
	// retried rather than rejected (see DefaultOrderWindow). Zero rejects
	// at once.
	OrderWindow time.Duration
	Logger      hclog.Logger
}

// Processor applies stream records. It is safe for concurrent use.
type Processor struct {
	st     Store
	name   string
	window time.Duration
	log    hclog.Logger

	mu   sync.Mutex
	regs map[string]cachedRegistration
}

type cachedRegistration struct {
	reg  *state.WorkflowLambda // nil: not registered
	read time.Time
}

// New returns a Processor.
func New(cfg Config) *Processor {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Processor{st: cfg.Store, name: cfg.Name, window: max(cfg.OrderWindow, 0), log: cfg.Logger,
		regs: map[string]cachedRegistration{}}
}

// Record is one DynamoDB stream record, as the poller reads it and the
// Lambda runtime delivers it.
type Record struct {
	ID        string // the stream record's eventID, for the log
	EventName string // INSERT, MODIFY or REMOVE
	Keys      map[string]types.AttributeValue
	NewImage  map[string]types.AttributeValue
}

// MalformedError reports a record that can never be applied: its item is
// not a request or event Whimbrel can read. It is reported and skipped, so
// it does not block the records behind it; the reason is also recorded on
// the item when its key can be read.
type MalformedError struct {
	Record string // the record's ID
	Err    error
}

func (e *MalformedError) Error() string {
	return fmt.Sprintf("stream record %s is malformed, skipped: %v", e.Record, e.Err)
}

func (e *MalformedError) Unwrap() error { return e.Err }

// errTooEarly is returned for an event that cannot be applied yet but may
// be once an earlier event arrives: the record is retried.
var errTooEarly = errors.New("not applicable yet; an earlier event may still arrive")

// Process applies one record. It returns nil when the record is done (or
// is none of this processor's business), a *MalformedError when it must be
// skipped, and any other error when it should be retried: the store could
// not be reached, or an earlier event may still arrive.
func (p *Processor) Process(ctx context.Context, r Record) error {
	if r.EventName != "INSERT" {
		return nil // outcomes recorded on items, and expiries
	}
	if len(r.NewImage) == 0 {
		// Not the item's fault: the stream is misconfigured. Skipping
		// would lose it; fail loudly until the stream is fixed.
		p.log.Error("a stream record carries no new image: the stream must be of new images (run whimbrel install)", "record", r.ID)
		return fmt.Errorf("stream record %s carries no new image: the stream must be of new images (NEW_IMAGE); run whimbrel install", r.ID)
	}
	switch {
	case has(r.Keys, "activity_event_id") || has(r.NewImage, "activity_event_id"):
		ev, err := dynamodb.DecodeEventImage(r.NewImage)
		if err != nil {
			p.recordMalformedEvent(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.event(ctx, ev)
	case has(r.Keys, "workflow_request_id") || has(r.NewImage, "workflow_request_id"):
		req, err := dynamodb.DecodeRequestImage(r.NewImage)
		if err != nil {
			p.recordMalformedRequest(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.request(ctx, req)
	}
	return &MalformedError{Record: r.ID, Err: errors.New("it is neither a workflow_request nor an activity_event item")}
}

func has(m map[string]types.AttributeValue, k string) bool {
	_, ok := m[k].(*types.AttributeValueMemberS)
	return ok
}

func str(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (p *Processor) recordMalformedEvent(ctx context.Context, r Record, cause error) {
	id, act := str(r.Keys, "activity_event_id"), str(r.Keys, "activity_exec_id")
	p.log.Error("malformed event; skipping it", "record", r.ID, "activity_event_id", id, "error", cause)
	if id == "" || act == "" {
		return
	}
	err := p.st.RecordEvent(ctx, id, act, state.Rejected("%v", cause))
	if err != nil && !errors.Is(err, state.ErrConflict) {
		p.log.Warn("recording why an event was skipped failed", "activity_event_id", id, "error", err)
	}
}

func (p *Processor) recordMalformedRequest(ctx context.Context, r Record, cause error) {
	id, name := str(r.Keys, "workflow_request_id"), str(r.Keys, "workflow_name")
	p.log.Error("malformed request; skipping it", "record", r.ID, "workflow_request_id", id, "error", cause)
	if id == "" || name == "" {
		return
	}
	err := p.st.RecordRequest(ctx, id, name, "", state.Rejected("%v", cause))
	if err != nil && !errors.Is(err, state.ErrConflict) {
		p.log.Warn("recording why a request was skipped failed", "workflow_request_id", id, "error", err)
	}
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

// --- requests

// request starts the registered workflow a request names, once.
func (p *Processor) request(ctx context.Context, r *state.WorkflowRequest) error {
	log := p.log.With("workflow_request_id", r.WorkflowRequestID, "workflow_name", r.WorkflowName)
	if r.Manual {
		log.Debug("a manual request: the Full Logic API started it")
		return nil
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
	case cur.Outcome.Processed():
		log.Debug("already decided", "outcome", cur.Outcome.Result)
		return nil
	}
	if reg == nil || reg.Definition == "" {
		return p.rejectRequest(ctx, r, fmt.Sprintf("workflow %q is not registered: run `whimbrel register FILE` with its definition, then insert a new request", r.WorkflowName))
	}
	def, err := workflow.ParseStored(reg.Definition)
	if err == nil && def.Name != r.WorkflowName {
		err = fmt.Errorf("it defines workflow %q", def.Name)
	}
	if err != nil {
		return p.rejectRequest(ctx, r, fmt.Sprintf("the registered definition of %q cannot be used: %v; register it again", r.WorkflowName, err))
	}
	source := "workflow_request"
	if r.Source != "" {
		source += " from " + r.Source
	}
	id, created, err := workflow.Start(ctx, p.st, def, workflow.StartOptions{RequestID: r.WorkflowRequestID, Source: source, RequestWritten: true})
	if err != nil {
		return fmt.Errorf("request %s: %w", r.WorkflowRequestID, err)
	}
	o := state.Outcome{Result: state.OutcomeStarted, Reason: "started " + id, At: state.Truncate(time.Now())}
	if err := p.st.RecordRequest(ctx, r.WorkflowRequestID, r.WorkflowName, id, o); err != nil && !errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("request %s: record its outcome: %w", r.WorkflowRequestID, err)
	}
	if created {
		log.Info("started", "workflow_exec_id", id)
	} else {
		log.Debug("started before", "workflow_exec_id", id)
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

// --- events

// maxDecideAttempts bounds how often one event is tried again after
// another participant changed its activity in between.
const maxDecideAttempts = 20

// event decides ev, after every earlier undecided event of its activity.
func (p *Processor) event(ctx context.Context, ev *state.ActivityEvent) error {
	reg, err := p.registration(ctx, ev.WorkflowName, false)
	if err != nil {
		return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	if !p.mine(reg) {
		p.log.Debug("another function handles this workflow", "activity_event_id", ev.ActivityEventID, "lambda", reg.Lambda)
		return nil
	}
	key := state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID}
	cursor := state.EventCursor(ev)
	for range maxDecideAttempts {
		a, err := p.st.GetActivity(ctx, key)
		switch {
		case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return p.rejectAlone(ctx, ev, fmt.Sprintf("activity %s of workflow %s cannot be used: %v", ev.ActivityExecID, ev.WorkflowExecID, err))
		case err != nil:
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
		if cursor <= a.EventCursor {
			return p.late(ctx, ev, a)
		}
		// The earlier events not decided yet take effect first.
		queue, err := p.earlier(ctx, ev, a.EventCursor)
		if err != nil {
			return err
		}
		queue = append(queue, ev)
		moved := false
		for _, e := range queue {
			a, err = p.decide(ctx, e, a)
			if errors.Is(err, state.ErrConflict) {
				moved = true // someone changed the activity meanwhile: read it again
				break
			}
			if err != nil {
				return err
			}
		}
		if !moved {
			return nil
		}
	}
	return fmt.Errorf("event %s: its activity kept changing; trying again later", ev.ActivityEventID)
}

// earlier lists the events of ev's activity after the cursor and before ev
// that are not decided yet, in order.
func (p *Processor) earlier(ctx context.Context, ev *state.ActivityEvent, after string) ([]*state.ActivityEvent, error) {
	all, err := p.st.Events(ctx, ev.ActivityExecID, state.CursorTime(after))
	// An event that cannot be decoded is reported by the store and left
	// out: the processor judges it from its own stream record.
	if _, err = state.Skipped(err); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	cursor := state.EventCursor(ev)
	var out []*state.ActivityEvent
	for _, e := range all {
		c := state.EventCursor(e)
		if c > after && c < cursor && !e.Outcome.Processed() && e.WorkflowExecID == ev.WorkflowExecID {
			out = append(out, e)
		}
	}
	return out, nil
}

// late handles an event at or before the activity's cursor: decided
// already (a record delivered again), or arrived after a later event took
// effect, when it is rejected, as taking effect now would break the order.
func (p *Processor) late(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) error {
	if a.State.Terminal() {
		// A processor that decided the event may have died before it
		// advanced the workflow; advancing again is harmless.
		if _, err := workflow.Advance(ctx, p.st, a, p.log.Named("advance")); err != nil {
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
	}
	if ev.Transition == state.TransitionHeartbeat {
		return nil // a heartbeat decided, or one superseded by a later event
	}
	cur, err := p.st.GetEvent(ctx, ev.ActivityEventID, ev.ActivityExecID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil // expired
	case err != nil:
		return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	case cur.Outcome.Processed():
		return nil
	}
	return p.rejectAlone(ctx, ev, fmt.Sprintf("a later event (%s) had taken effect when it arrived: events of an activity take effect in the order of their when", a.EventCursor))
}

// rejectAlone records a rejection on an event whose activity is not
// written.
func (p *Processor) rejectAlone(ctx context.Context, ev *state.ActivityEvent, why string) error {
	p.log.Warn("event rejected", "activity_event_id", ev.ActivityEventID, "transition", ev.Transition, "why", why)
	err := p.st.RecordEvent(ctx, ev.ActivityEventID, ev.ActivityExecID, state.Rejected("%s", why))
	if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("event %s: record its rejection: %w", ev.ActivityEventID, err)
	}
	return nil
}

// decide applies or rejects one event in one conditional write that moves
// the activity's cursor past it, then advances the workflow if the
// activity ended. A *ConflictError means the activity changed meanwhile.
func (p *Processor) decide(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityExec, error) {
	log := p.log.With("activity_event_id", ev.ActivityEventID, "transition", ev.Transition)
	c, o, err := p.changeFor(ctx, ev, a)
	if err != nil {
		return nil, err
	}
	if c == nil {
		// An earlier event may still arrive and make this one legal —
		// unless the activity is final, or the event claims a time to
		// come (a clock far ahead must not hold the shard).
		age := time.Since(ev.When)
		if !a.State.Terminal() && age < p.window && age > -p.window {
			log.Debug("cannot apply yet; an earlier event may still arrive", "why", o.Reason)
			return nil, fmt.Errorf("event %s: %w (%s)", ev.ActivityEventID, errTooEarly, o.Reason)
		}
		c = &state.ActivityChange{From: []state.ActivityState{a.State}}
	}
	c.Event = &state.EventStep{Prev: a.EventCursor, Next: state.EventCursor(ev), EventID: ev.ActivityEventID}
	if ev.Transition != state.TransitionHeartbeat || o.Result == state.OutcomeRejected {
		c.Event.Outcome = &o
	}
	next, err := p.st.UpdateActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID}, *c)
	var ce *state.ConflictError
	var nf *state.NotFoundError
	switch {
	case errors.As(err, &ce) && ce.Kind == "activity event", errors.As(err, &nf) && nf.Kind == "activity event":
		// An outcome was recorded on the event on its own meanwhile: it
		// stands, and the cursor moves past the event without a change.
		log.Debug("the event has an outcome already, or is gone; passing it", "error", err)
		c = &state.ActivityChange{From: []state.ActivityState{a.State},
			Event: &state.EventStep{Prev: a.EventCursor, Next: state.EventCursor(ev)}}
		return p.st.UpdateActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID}, *c)
	case err != nil && !errors.Is(err, state.ErrConflict):
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	case err != nil:
		return nil, err
	}
	if o.Result == state.OutcomeRejected {
		log.Warn("event rejected", "why", o.Reason)
	} else if ev.Transition != state.TransitionHeartbeat {
		log.Info("event applied", "activity_exec_id", ev.ActivityExecID, "state", next.State)
	}
	if c.To != "" && next.State.Terminal() {
		if _, err := workflow.Advance(ctx, p.st, next, log.Named("advance")); err != nil {
			// The event took effect; the monitor finishes the advance.
			log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
		}
	}
	return next, nil
}

// changeFor returns the write an event asks for of the activity as it
// stands, with the outcome to record; or no write and the rejection.
func (p *Processor) changeFor(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityChange, state.Outcome, error) {
	now := state.Truncate(time.Now())
	applied := state.Outcome{Result: state.OutcomeApplied, At: now}
	reason := ev.Reason
	if reason == "" {
		reason = "event " + ev.ActivityEventID
		if ev.Source != "" {
			reason += " from " + ev.Source
		}
	}
	heldByOther := ev.Owner != "" && a.Owner != ev.Owner

	if ev.Transition == state.TransitionHeartbeat {
		switch {
		case a.State != state.Running:
			return nil, state.Rejected("a heartbeat of an activity that is %s, not RUNNING", a.State), nil
		case heldByOther:
			return nil, state.Rejected("a heartbeat of owner %s, but %s holds the activity", ev.Owner, a.Owner), nil
		}
		return &state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: ev.Owner, Beat: true, At: ev.When}, applied, nil
	}

	to := state.ActivityState(ev.Transition)
	var exit *state.Exit
	if ev.ExitCode != nil {
		exit = &state.Exit{Code: *ev.ExitCode, Signal: ev.Signal}
	}
	if (to == state.Completed || to == state.Failed) && ev.Owner != "" && a.Owner == ev.Owner &&
		(a.State == state.CancelledRunning || a.State == state.TimedOut) {
		// The wrapper's outcome after its activity was cancelled or timed
		// out: the state is final; how the command ended goes beside it.
		c := &state.ActivityChange{From: []state.ActivityState{a.State}, Owner: ev.Owner, Exit: exit, Error: ev.Error, Reason: reason}
		if exit == nil {
			c.Exit = &state.Exit{Code: -1}
		}
		return c, state.Outcome{Result: state.OutcomeRejected, At: now,
			Reason: fmt.Sprintf("the activity was already %s; how its command ended is recorded beside it", a.State)}, nil
	}
	if err := state.CheckTransition(a.State, to); err != nil {
		return nil, state.Rejected("%v", err), nil
	}
	c := &state.ActivityChange{From: []state.ActivityState{a.State}, To: to, Exit: exit, Error: ev.Error, Reason: reason}
	switch {
	case to == state.Running:
		wf, err := p.st.GetWorkflow(ctx, ev.WorkflowExecID)
		switch {
		case errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem):
			return nil, state.Rejected("its workflow cannot be used: %v", err), nil
		case err != nil:
			return nil, state.Outcome{}, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		case wf.State != state.WorkflowRunning:
			return nil, state.Rejected("workflow %s is %s, not RUNNING", wf.WorkflowExecID, wf.State), nil
		}
		owner := ev.Owner
		if owner == "" {
			owner = ev.ActivityEventID
		}
		c.Claim = &state.Claim{Owner: owner, Host: ev.Host, PID: ev.PID, HeartbeatEnabled: ev.HeartbeatEnabled,
			HeartbeatInterval: ev.HeartbeatInterval, HeartbeatTimeout: ev.HeartbeatTimeout}
	case heldByOther:
		return nil, state.Rejected("sent by owner %s, but %s holds the activity", ev.Owner, ownerOrNone(a.Owner)), nil
	case (to == state.Ready || to == state.Queued) && a.State == state.Requested && len(a.PendingDependencies) > 0:
		return nil, state.Rejected("it still waits on %s", strings.Join(a.PendingDependencies, ", ")), nil
	default:
		c.Owner = ev.Owner
	}
	return c, applied, nil
}

func ownerOrNone(o string) string {
	if o == "" {
		return "no owner"
	}
	return o
}

// IsTooEarly reports whether err says an event should be retried because
// an earlier event of its activity may still arrive.
func IsTooEarly(err error) bool { return errors.Is(err, errTooEarly) }
