// Package simpleapi is the Simple Lambda API: clients only insert items —
// a workflow_request to start a workflow, an activity_event to move an
// activity — and a processor reading the two tables' DynamoDB streams does
// the rest with the Full Logic API's code (package workflow). See
// docs/contract.md#the-simple-lambda-api.
//
// The Processor applies one stream record. It runs inside a Lambda
// function (simpleapi/lambda, cmd/whimbrel-lambda) or a long-running
// poller (simpleapi/poller, cmd/whimbrel-poller). It sits above the core:
// it moves activities and workflows with the Full Logic API (the Store and
// package workflow), and keeps the API's own items in the inbox beside the
// Store (simpleapi/inbox; simpleapi/dynamoinbox and simpleapi/sqliteinbox
// on each store). The wrapper's side is simpleapi/report. Either way every record may arrive twice, late or
// out of order, and any number of processors may run: a request is claimed
// by recording its outcome before the execution its ID derives is started,
// so one processor starts it; an event is decided by one conditional write
// that records its outcome and moves its activity's event cursor, so it is
// decided once.
//
// The events of one activity take effect in the order of the state
// machine first: an event asking for a state further along than the next
// (COMPLETED while the activity is still QUEUED) waits for the events
// before it, for the order window, whatever its when or ID; one asking for
// a state the activity has passed is rejected. Only events the state
// machine does not order (COMPLETED against FAILED or CANCEL, heartbeats
// among themselves) go by their when, then their IDs. An event dated more
// than MaxSkew ahead of the processor's clock, or more than MaxAge before
// it was written, is rejected, not applied; so is a heartbeat or an end
// sent for an activity its wrapper holds by anyone but that wrapper.
package simpleapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a processor needs of a store: the state.Store, for the
// Full Logic API's moves, and the inbox beside it (dynamoinbox or
// sqliteinbox on the same store).
type Store interface {
	state.Store
	inbox.Inbox
}

// DefaultOrderWindow is how long the commands retry an event whose
// transition cannot be applied yet, but would be after an event before it
// in the state machine's order, before they reject it: that event may
// still be on its way (on another stream shard, or from a slower writer).
const DefaultOrderWindow = 5 * time.Second

// DefaultMaxSkew is how far ahead of the processor's clock an event's when
// may be: a client's clock may run a little ahead, but an event dated
// later (a local time written as UTC) is rejected, so that it can neither
// keep an activity alive with heartbeats from the future nor take the
// place of the events written after it.
const DefaultMaxSkew = time.Minute

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
	// OrderWindow: an event that cannot be applied yet, first seen by this
	// processor less than this long ago, is retried rather than rejected
	// (see DefaultOrderWindow). Zero rejects at once.
	OrderWindow time.Duration
	// MaxSkew: an event whose when is further ahead of now is rejected
	// (default DefaultMaxSkew).
	MaxSkew time.Duration
	// MaxAge: an event whose when lies further before its writing is
	// rejected (default DefaultMaxAge).
	MaxAge time.Duration
	Logger hclog.Logger
}

// Processor applies stream records. It is safe for concurrent use.
type Processor struct {
	st     Store
	name   string
	window time.Duration
	skew   time.Duration
	maxAge time.Duration
	log    hclog.Logger

	mu   sync.Mutex
	regs map[string]cachedRegistration
	// seen is when this processor first saw each event it could not
	// decide yet.
	seen map[string]time.Time
	// workflowOf caches the workflow of activities found by their ID
	// alone: it never changes.
	workflowOf map[string]string
}

type cachedRegistration struct {
	reg  *state.WorkflowLambda // nil: not registered
	read time.Time
}

// Logger returns the processor's logger, for the loops that feed it.
func (p *Processor) Logger() hclog.Logger { return p.log }

// New returns a Processor.
func New(cfg Config) *Processor {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	skew, maxAge := orDefault(cfg.MaxSkew, DefaultMaxSkew), orDefault(cfg.MaxAge, DefaultMaxAge)
	return &Processor{st: cfg.Store, name: cfg.Name, window: max(cfg.OrderWindow, 0), skew: skew, maxAge: maxAge, log: cfg.Logger,
		regs: map[string]cachedRegistration{}, seen: map[string]time.Time{}, workflowOf: map[string]string{}}
}

// Record is one DynamoDB stream record, as the poller reads it and the
// Lambda runtime delivers it.
type Record struct {
	ID        string // the stream record's eventID, for the log
	EventName string // INSERT, MODIFY or REMOVE
	Keys      map[string]types.AttributeValue
	NewImage  map[string]types.AttributeValue
	// Created is when the item was written, by DynamoDB's clock (the
	// record's ApproximateCreationDateTime); zero if unknown.
	Created time.Time
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

// Deferring: a record whose event waits for an earlier one is set aside
// and tried again (by the poller, or within a Lambda invocation), first
// after DeferFirst, then less and less often up to DeferMax, while the
// records behind it go on; the processor rejects it once its order window
// has passed.
const (
	DeferFirst = 50 * time.Millisecond
	DeferMax   = time.Second
)

// errTooEarly is returned for a record that cannot be decided yet but may
// be soon: an event waiting for the events before it, or a request whose
// start another processor claimed and has not finished. The record is set
// aside and retried.
var errTooEarly = errors.New("not applicable yet; an earlier event may still arrive")

// Process applies one record. It returns nil when the record is done (or
// is none of this processor's business), a *MalformedError when it must be
// skipped, and any other error when it should be retried: the store could
// not be reached, or (IsTooEarly) what it waits for may still come.
func (p *Processor) Process(ctx context.Context, r Record) error {
	switch {
	case r.EventName == "MODIFY" && !has(r.NewImage, "outcome") && !has(r.NewImage, "expires_at"):
		// A client wrote a decided item again, wiping its outcome: it is
		// decided again (see event and request for how).
	case r.EventName != "INSERT":
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
		ev, err := dynamoinbox.DecodeEventImage(r.NewImage)
		if err != nil {
			p.recordMalformedEvent(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.event(ctx, ev, r)
	case has(r.Keys, "workflow_request_id") || has(r.NewImage, "workflow_request_id"):
		req, err := dynamoinbox.DecodeRequestImage(r.NewImage)
		if err != nil {
			p.recordMalformedRequest(ctx, r, err)
			return &MalformedError{Record: r.ID, Err: err}
		}
		return p.request(ctx, req)
	}
	return &MalformedError{Record: r.ID, Err: errors.New("it is neither a workflow_request nor an activity_event item")}
}

func has(m map[string]types.AttributeValue, k string) bool {
	_, ok := m[k]
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

// startGrace is how long a request whose start another processor claimed
// may stay unstarted before this one finishes the start; startRecovery is
// how old such a claim may be for that (an older one's execution was
// started and has expired since).
const (
	startGrace    = 30 * time.Second
	startRecovery = time.Hour
)

// request starts the registered workflow a request names, once: the
// processor that records the outcome "started" first starts the execution
// (whose ID the request's derives) and logs it; any other finds the
// outcome and only makes sure the start finished.
func (p *Processor) request(ctx context.Context, r *state.WorkflowRequest) error {
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
		return fmt.Errorf("request %s: %w (another processor is starting %s)", cur.WorkflowRequestID, errTooEarly, id)
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

// --- events

// maxDecideAttempts bounds how often one event is tried again after
// another participant changed its activity in between.
const maxDecideAttempts = 20

// event decides ev: it applies it, rejects it, or (when it may become
// legal once an event before it in the state machine's order arrives)
// returns errTooEarly so that the record is tried again.
func (p *Processor) event(ctx context.Context, ev *state.ActivityEvent, r Record) error {
	log := p.log.With("activity_event_id", ev.ActivityEventID, "transition", ev.Transition)
	if ev.Manual {
		// A manual item: the Full Logic API made this change itself.
		log.Debug("a manual event: the Full Logic API applied it")
		return p.recordAlone(ctx, ev, state.Outcome{Result: state.OutcomeIgnored,
			Reason: "manual: the Full Logic API applies it itself", At: state.Truncate(time.Now())})
	}
	if ev.WorkflowName == "" && ev.WorkflowExecID != "" {
		ev.WorkflowName, _, _ = state.SplitID(ev.WorkflowExecID)
	}
	if ev.WorkflowName != "" {
		reg, err := p.registration(ctx, ev.WorkflowName, false)
		if err != nil {
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
		if !p.mine(reg) {
			log.Debug("another function handles this workflow", "lambda", reg.Lambda)
			return nil
		}
	}
	if ev.When.IsZero() {
		// No when: it happened when it was written.
		ev.When = r.Created
		if ev.When.IsZero() {
			ev.When = time.Now()
		}
	}
	for range maxDecideAttempts {
		// Decided already (a record delivered again, or decided as an
		// earlier event of another's)? Strongly consistent.
		cur, err := p.st.GetEvent(ctx, ev.ActivityEventID, ev.ActivityExecID)
		switch {
		case errors.Is(err, state.ErrNotFound):
			return nil // expired
		case err != nil && !errors.Is(err, state.ErrInvalidItem):
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		case err == nil && cur.Outcome.Processed():
			p.forget(ev.ActivityEventID)
			return p.decidedBefore(ctx, ev)
		}
		a, err := p.locate(ctx, ev)
		switch {
		case errors.Is(err, state.ErrNotFound) && p.young(ev.ActivityEventID):
			return fmt.Errorf("event %s: %w (activity %s is not found yet)", ev.ActivityEventID, errTooEarly, ev.ActivityExecID)
		case errors.Is(err, state.ErrNotFound), errors.Is(err, state.ErrInvalidItem):
			return p.rejectAlone(ctx, ev, fmt.Sprintf("activity %s cannot be used: %v", ev.ActivityExecID, err))
		case err != nil:
			return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		}
		if ev.WorkflowName == "" {
			// Found by its ID alone: now its workflow says who handles it.
			ev.WorkflowName = a.WorkflowName
			reg, err := p.registration(ctx, ev.WorkflowName, false)
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
			}
			if !p.mine(reg) {
				log.Debug("another function handles this workflow", "lambda", reg.Lambda)
				return nil
			}
		}
		if why := p.checkEvent(ev, a, r.Created); why != "" {
			return p.rejectAlone(ctx, ev, why)
		}
		if r.EventName == "MODIFY" && tookEffect(ev, a) {
			// Written again over its outcome, after it took effect.
			return p.recordAlone(ctx, ev, state.Outcome{Result: state.OutcomeApplied, At: state.Truncate(time.Now()),
				Reason: "it took effect before it was written again"})
		}
		// The undecided events before it in order take effect first, as
		// far as they can now.
		a, err = p.earlier(ctx, ev, a)
		if errors.Is(err, state.ErrConflict) {
			continue // the activity changed meanwhile: read it again
		}
		if err != nil {
			return err
		}
		_, err = p.decide(ctx, ev, a, p.young(ev.ActivityEventID))
		if errors.Is(err, state.ErrConflict) {
			continue
		}
		if err == nil {
			p.forget(ev.ActivityEventID)
		}
		return err
	}
	return fmt.Errorf("event %s: its activity kept changing; trying again later", ev.ActivityEventID)
}

// young reports whether this processor first saw an event less than the
// order window ago: an event it waits for may still be on its way. The
// window runs from the first sight, not from the event's when or the
// record's creation, so that a backlog read late (a poller restarted, a
// clock behind) still gives each event's predecessors their time.
func (p *Processor) young(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	first, ok := p.seen[id]
	if !ok {
		if len(p.seen) > 100000 {
			clear(p.seen)
		}
		first = time.Now()
		p.seen[id] = first
	}
	return time.Since(first) < p.window
}

func (p *Processor) forget(id string) {
	p.mu.Lock()
	delete(p.seen, id)
	p.mu.Unlock()
}

// locate reads ev's activity, finding its workflow when the event names
// only the activity (the base contract's shape): by the activity table's hash key,
// activity_exec_id, alone.
func (p *Processor) locate(ctx context.Context, ev *state.ActivityEvent) (*state.ActivityExec, error) {
	if ev.WorkflowExecID == "" {
		p.mu.Lock()
		ev.WorkflowExecID = p.workflowOf[ev.ActivityExecID]
		p.mu.Unlock()
	}
	if ev.WorkflowExecID != "" {
		return p.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID})
	}
	a, err := p.st.FindActivity(ctx, ev.ActivityExecID)
	if err != nil {
		return nil, err
	}
	ev.WorkflowExecID = a.WorkflowExecID
	p.mu.Lock()
	if len(p.workflowOf) >= 100000 {
		clear(p.workflowOf)
	}
	p.workflowOf[ev.ActivityExecID] = a.WorkflowExecID
	p.mu.Unlock()
	return a, nil
}

// decidedBefore handles an event that has its outcome: a processor that
// applied it may have died before it advanced the workflow; advancing
// again is harmless.
func (p *Processor) decidedBefore(ctx context.Context, ev *state.ActivityEvent) error {
	if ev.WorkflowExecID == "" {
		p.mu.Lock()
		ev.WorkflowExecID = p.workflowOf[ev.ActivityExecID]
		p.mu.Unlock()
	}
	if ev.WorkflowExecID == "" {
		return nil
	}
	a, err := p.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: ev.WorkflowExecID})
	if err != nil || !a.State.Terminal() {
		return nil
	}
	if _, err := workflow.Advance(ctx, p.st, a, p.log.Named("advance")); err != nil {
		return fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	return nil
}

// tookEffect reports whether the activity shows that ev took effect: it
// claimed the activity, or the activity is in the state it asked for and
// names it (the reason an applied event records is "event ID…"), or it
// was the last event decided.
func tookEffect(ev *state.ActivityEvent, a *state.ActivityExec) bool {
	if ev.Transition == string(state.Running) && (a.Owner == ownerFor(ev) || a.Owner == ev.ActivityEventID) {
		return true
	}
	named := strings.HasSuffix(a.EventCursor, "/"+ev.ActivityEventID) || strings.Contains(a.Reason, "event "+ev.ActivityEventID)
	switch ev.Transition {
	case state.TransitionHeartbeat:
		return false // deciding it again does no harm
	case state.TransitionCancel:
		return named && (a.State == state.Cancelled || a.State == state.CancelledRunning)
	}
	return named && string(a.State) == ev.Transition
}

// order is the state machine's rank of the state an event asks for: an
// activity only ever moves to a higher rank. Heartbeats come between
// RUNNING and the end.
func order(transition string) int {
	switch transition {
	case state.TransitionHeartbeat:
		return 5
	case state.TransitionCancel:
		return 6
	}
	return rank(state.ActivityState(transition))
}

func rank(s state.ActivityState) int {
	switch s {
	case state.Requested:
		return 0
	case state.Ready:
		return 1
	case state.Queued:
		return 2
	case state.Preparing:
		return 3
	case state.Running:
		return 4
	}
	return 6 // the end states
}

// reachable reports whether the state machine leads from one state to
// another in more than one move: an event asking for it waits for the
// events of the moves between.
func reachable(from, to state.ActivityState) bool {
	seen := map[state.ActivityState]bool{}
	next := from.Next()
	for len(next) > 0 {
		s := next[0]
		next = next[1:]
		if s == to {
			return true
		}
		if !seen[s] {
			seen[s] = true
			next = append(next, s.Next()...)
		}
	}
	return false
}

// before reports whether event a takes effect before event b: by the state
// machine's order, then by when, then by ID.
func before(a, b *state.ActivityEvent) bool {
	if oa, ob := order(a.Transition), order(b.Transition); oa != ob {
		return oa < ob
	}
	if !a.When.Equal(b.When) {
		return a.When.Before(b.When)
	}
	return a.ActivityEventID < b.ActivityEventID
}

// earlier decides the undecided events of ev's activity that come before
// ev and can be decided now; the others are left to their own records. It
// returns the activity as it then stands. The events index is eventually
// consistent and lists only events with when_epoch, so this is an
// improvement on the order, not what keeps it: an event the index misses
// is still decided by its own record.
func (p *Processor) earlier(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityExec, error) {
	// Only the recent ones: an older undecided event is its own record's
	// to decide, and an activity that heartbeats for hours has thousands.
	all, err := p.st.Events(ctx, ev.ActivityExecID, ev.When.Add(-p.window-earlierSpan))
	// An event that cannot be decoded is reported by the store and left
	// out: the processor judges it from its own stream record.
	if _, err = state.Skipped(err); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	}
	var queue []*state.ActivityEvent
	for _, e := range all {
		if e.ActivityEventID == ev.ActivityEventID || e.Outcome.Processed() || e.Manual || p.foreign(e, a) || !before(e, ev) {
			continue
		}
		e.WorkflowExecID, e.WorkflowName = a.WorkflowExecID, a.WorkflowName
		queue = append(queue, e)
	}
	sort.Slice(queue, func(i, j int) bool { return before(queue[i], queue[j]) })
	for _, e := range queue {
		next, err := p.decide(ctx, e, a, true)
		switch {
		case errors.Is(err, errTooEarly):
			continue // its own record decides it
		case err != nil:
			return nil, err
		}
		a = next
	}
	return a, nil
}

// earlierSpan is how far before an event's when earlier looks, beyond the
// order window.
const earlierSpan = time.Minute

// verdict is what an event asks of an activity as it stands.
type verdict int

const (
	apply  verdict = iota // the change is legal now
	reject                // it never will be
	wait                  // it may be once the events before it arrive
)

// decide applies or rejects one event in one conditional write that
// records its outcome and moves the activity's cursor, then advances the
// workflow if the activity ended. An event that may become legal is left
// undecided (errTooEarly) while mayWait. A *ConflictError means the
// activity changed meanwhile; an event decided meanwhile returns the
// activity unchanged.
func (p *Processor) decide(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec, mayWait bool) (*state.ActivityExec, error) {
	log := p.log.With("activity_event_id", ev.ActivityEventID, "transition", ev.Transition)
	c, o, v, err := p.changeFor(ctx, ev, a)
	if err != nil {
		return nil, err
	}
	switch {
	case v == wait && mayWait:
		log.Debug("cannot apply yet; an event before it may still arrive", "why", o.Reason)
		return nil, fmt.Errorf("event %s: %w (%s)", ev.ActivityEventID, errTooEarly, o.Reason)
	case v == wait:
		o = state.Rejected("%s, and no event that would allow it came within %s", o.Reason, p.window)
		fallthrough
	case v == reject:
		c = &state.ActivityChange{From: []state.ActivityState{a.State}}
	}
	step := inbox.Step{Prev: a.EventCursor, Next: nextCursor(a.EventCursor, ev.ActivityEventID), EventID: ev.ActivityEventID, Outcome: &o}
	key := state.ActivityKey{ActivityExecID: ev.ActivityExecID, WorkflowExecID: a.WorkflowExecID}
	next, err := p.st.Decide(ctx, key, *c, step)
	var ce *state.ConflictError
	var nf *state.NotFoundError
	switch {
	case errors.As(err, &ce) && ce.Kind == "activity event", errors.As(err, &nf) && nf.Kind == "activity event":
		log.Debug("the event was decided meanwhile, or is gone", "error", err)
		return a, nil
	case err != nil && !errors.Is(err, state.ErrConflict):
		return nil, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
	case err != nil:
		return nil, err
	}
	p.mu.Lock()
	p.workflowOf[ev.ActivityExecID] = a.WorkflowExecID
	p.mu.Unlock()
	switch {
	case o.Result == state.OutcomeRejected:
		log.Warn("event rejected", "activity_exec_id", ev.ActivityExecID, "why", o.Reason)
	case ev.Transition == state.TransitionHeartbeat:
		log.Debug("heartbeat applied", "activity_exec_id", ev.ActivityExecID)
	default:
		log.Info("event applied", "activity_exec_id", ev.ActivityExecID, "state", next.State)
	}
	if next.State.Terminal() && next.State != a.State {
		if _, err := workflow.Advance(ctx, p.st, next, log.Named("advance")); err != nil {
			// The event took effect; the monitor finishes the advance.
			log.Warn("advancing the workflow failed; the monitor will finish it", "error", err)
		}
	}
	return next, nil
}

// nextCursor is the activity's event cursor after deciding one more event:
// a count of the decisions, and the last event decided. It only has to
// grow, so that each decision is conditional on the one before it.
func nextCursor(prev, eventID string) string {
	var n int64
	if len(prev) >= 15 {
		n, _ = strconv.ParseInt(prev[:15], 10, 64)
	}
	return fmt.Sprintf("%015d/%s", n+1, eventID)
}

// changeFor returns the write an event asks for of the activity as it
// stands, with the outcome to record and the verdict; for a rejection or a
// wait, the outcome's reason says why.
func (p *Processor) changeFor(ctx context.Context, ev *state.ActivityEvent, a *state.ActivityExec) (*state.ActivityChange, state.Outcome, verdict, error) {
	now := time.Now()
	applied := state.Outcome{Result: state.OutcomeApplied, At: state.Truncate(now)}
	no := func(v verdict, format string, args ...any) (*state.ActivityChange, state.Outcome, verdict, error) {
		return nil, state.Rejected(format, args...), v, nil
	}
	reason := ev.Reason
	if reason == "" {
		reason = "event " + ev.ActivityEventID
		if ev.Source != "" {
			reason += " from " + ev.Source
		}
	}
	held := fence(ev, a)
	at := ev.When
	if at.After(now) {
		at = now // within the skew allowed, but nothing is recorded as to come
	}

	if ev.Transition == state.TransitionHeartbeat {
		switch {
		case a.State.Terminal():
			return no(reject, "a heartbeat of an activity that is %s, not RUNNING", a.State)
		case a.State != state.Running:
			return no(wait, "a heartbeat of an activity that is %s, not RUNNING yet", a.State)
		case held != "":
			return no(reject, "%s", held)
		case !a.HeartbeatEnabled:
			// heartbeat_time_epoch stays negative while heartbeats are
			// off (docs/contract.md#times).
			return no(reject, "heartbeats are off for this activity (heartbeat_enabled is false): set heartbeat_interval in the workflow definition, or heartbeat_enabled on the RUNNING event")
		}
		// Heartbeats arrive in any order: the newest stands, and so does
		// the newest progress.
		c := &state.ActivityChange{From: []state.ActivityState{state.Running}, Owner: a.Owner, Beat: true, At: at}
		if ev.Progress != "" && len(ev.Progress) <= state.MaxProgress && !at.Before(a.ProgressTime) {
			c.Progress = ev.Progress
		}
		if at.Before(a.HeartbeatTime) {
			c.At = a.HeartbeatTime
			c.Progress = ""
		}
		return c, applied, apply, nil
	}

	to := state.ActivityState(ev.Transition)
	if ev.Transition == state.TransitionCancel {
		to = state.Cancelled
		if a.State == state.Running {
			to = state.CancelledRunning
		}
	}
	var exit *state.Exit
	if ev.ExitCode != nil {
		exit = &state.Exit{Code: *ev.ExitCode, Signal: ev.Signal}
	}
	if (to == state.Completed || to == state.Failed) && ev.Owner != "" && a.Owner == ev.Owner &&
		(a.State == state.CancelledRunning || a.State == state.TimedOut) {
		// The wrapper's outcome after its activity was cancelled or timed
		// out: the state is final; how the command ended goes beside it.
		c := &state.ActivityChange{From: []state.ActivityState{a.State}, Owner: ev.Owner, Exit: exit, Error: ev.Error, Reason: reason, At: at}
		if exit == nil {
			c.Exit = &state.Exit{Code: -1}
		}
		return c, state.Outcome{Result: state.OutcomeRejected, At: state.Truncate(now),
			Reason: fmt.Sprintf("the activity was already %s; how its command ended is recorded beside it", a.State)}, apply, nil
	}
	if err := state.CheckTransition(a.State, to); err != nil {
		if reachable(a.State, to) {
			return no(wait, "%v", err)
		}
		if strings.Contains(err.Error(), "already") {
			return no(reject, "%v", err)
		}
		return no(reject, "the activity is already %s: %v", a.State, err)
	}
	c := &state.ActivityChange{From: []state.ActivityState{a.State}, To: to, Exit: exit, Error: ev.Error, Reason: reason, At: at}
	if ev.Output != "" {
		if to != state.Completed {
			return no(reject, "an output (WHIMBREL_OUTPUT) is recorded only with COMPLETED, not %s", to)
		}
		if err := checkOutput(ev.Output); err != nil {
			return no(reject, "%v", err)
		}
		c.Output = ev.Output
	}
	if ev.Progress != "" && len(ev.Progress) <= state.MaxProgress {
		c.Progress = ev.Progress
	}
	switch {
	case to == state.Running:
		wf, err := p.st.GetWorkflow(ctx, a.WorkflowExecID)
		switch {
		case errors.Is(err, state.ErrNotFound) || errors.Is(err, state.ErrInvalidItem):
			return no(reject, "its workflow cannot be used: %v", err)
		case err != nil:
			return nil, state.Outcome{}, reject, fmt.Errorf("event %s: %w", ev.ActivityEventID, err)
		case wf.State == state.WorkflowRequested:
			return no(wait, "workflow %s is still REQUESTED", wf.WorkflowExecID)
		case wf.State != state.WorkflowRunning:
			return no(reject, "workflow %s is %s, not RUNNING", wf.WorkflowExecID, wf.State)
		}
		c.Claim = claim(ev, wf, a, ownerFor(ev))
		// The first heartbeat is the claim itself, as the wrapper's is:
		// the monitor then times the activity out from its start.
		c.Beat = c.Claim.HeartbeatEnabled
	case held != "":
		return no(reject, "%s", held)
	case (to == state.Ready || to == state.Queued) && a.State == state.Requested && len(a.PendingDependencies) > 0:
		return no(reject, "it still waits on %s", strings.Join(a.PendingDependencies, ", "))
	default:
		// Fenced on the owner judged above, so that a claim landing in
		// between wins.
		c.Owner = a.Owner
	}
	return c, applied, apply, nil
}

// claim is what a RUNNING event records: the event's heartbeat settings,
// else those the workflow's definition gives the activity. Heartbeats are
// on when the event or the definition asks for them.
func claim(ev *state.ActivityEvent, wf *state.WorkflowExec, a *state.ActivityExec, owner string) *state.Claim {
	cl := &state.Claim{Owner: owner, Host: ev.Host, PID: ev.PID, HeartbeatEnabled: ev.HeartbeatEnabled,
		HeartbeatInterval: ev.HeartbeatInterval, HeartbeatTimeout: ev.HeartbeatTimeout}
	if def, err := definition.FromJSON(wf.Definition); err == nil && def.Activities[a.ActivityName] != nil {
		s := def.Effective(a.ActivityName)
		if s.HeartbeatInterval > 0 || s.HeartbeatTimeout > 0 {
			cl.HeartbeatEnabled = true
		}
		if cl.HeartbeatInterval == 0 {
			cl.HeartbeatInterval = time.Duration(s.HeartbeatInterval)
		}
		if cl.HeartbeatTimeout == 0 {
			cl.HeartbeatTimeout = time.Duration(s.HeartbeatTimeout)
		}
	}
	if cl.HeartbeatEnabled {
		if cl.HeartbeatInterval == 0 {
			cl.HeartbeatInterval = state.DefaultHeartbeatInterval
		}
		if cl.HeartbeatTimeout == 0 {
			cl.HeartbeatTimeout = state.DefaultHeartbeatTimeout
		}
	}
	return cl
}

func ownerOrNone(o string) string {
	if o == "" {
		return "no owner"
	}
	return o
}

// recordAlone records an outcome on an event without touching its
// activity.
func (p *Processor) recordAlone(ctx context.Context, ev *state.ActivityEvent, o state.Outcome) error {
	err := p.st.RecordEvent(ctx, ev.ActivityEventID, ev.ActivityExecID, o)
	if err != nil && !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("event %s: record its outcome: %w", ev.ActivityEventID, err)
	}
	p.forget(ev.ActivityEventID)
	return nil
}

// rejectAlone records a rejection on an event whose activity is not
// written.
func (p *Processor) rejectAlone(ctx context.Context, ev *state.ActivityEvent, why string) error {
	p.log.Warn("event rejected", "activity_event_id", ev.ActivityEventID, "transition", ev.Transition, "why", why)
	return p.recordAlone(ctx, ev, state.Rejected("%s", why))
}

// ErrTooEarly is the error of a record that waits for the events before
// it (see IsTooEarly).
var ErrTooEarly = errTooEarly

// IsTooEarly reports whether err says a record should be retried because
// what it waits for (an earlier event of its activity, another processor's
// start) may still come.
func IsTooEarly(err error) bool { return errors.Is(err, errTooEarly) }
