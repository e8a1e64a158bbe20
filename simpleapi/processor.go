// Package simpleapi is the Simple Lambda API: clients only insert items —
// a workflow_request to start a workflow, an activity_event to move an
// activity — and a processor reading the two tables' DynamoDB streams does
// the rest with the Full Logic API's code (package workflow). See
// docs/contract.md#the-simple-lambda-api.
//
// The Processor applies one decoded request or event; simpleapi/stream
// decodes the stream records it is fed. It runs inside a Lambda
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
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
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

// Processor applies requests and events. It is safe for concurrent use.
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

// MalformedError reports a record that can never be applied: its item is
// not a request or event Whimbrel can read (see RejectMalformedEvent). It is reported and skipped, so
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

// ErrTooEarly is returned for a record that cannot be decided yet but may
// be soon: an event waiting for the events before it, or a request whose
// start another processor claimed and has not finished. The record is set
// aside and retried (see IsTooEarly).
var ErrTooEarly = errors.New("not applicable yet; an earlier event may still arrive")

// IsTooEarly reports whether err says a record should be retried because
// what it waits for (an earlier event of its activity, another processor's
// start) may still come.
func IsTooEarly(err error) bool { return errors.Is(err, ErrTooEarly) }
