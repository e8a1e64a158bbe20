// Package state is the contract every Whimbrel participant shares: the items
// of the seven tables, the activity and workflow states with the legal moves
// between them, the two time encodings, and the Store through which all of
// them are read and changed. The values every layer must agree on (table
// names, defaults of the lease and the kill grace, limits, the names of the
// command's environment, whimbrel-run's exit statuses) are defined once, in
// contract.go.
//
// Whimbrel has no server. Wrappers, launchers, monitors and the operator CLI
// coordinate only through the Store, whose every state change is one
// conditional write: a write whose condition fails returns a *ConflictError
// describing what the item holds instead, so the loser of a race learns the
// winner without another read. Backends live in subpackages named after
// their dependency (state/dynamodb); state/storetest is the conformance suite
// they all pass.
package state

import (
	"context"
	"time"
)

// Store is the shared state of every workflow. Implementations are safe for
// concurrent use by many goroutines and many processes.
//
// Items come from clients Whimbrel did not write, so each is decoded on its
// own. A read of one item that cannot be decoded returns a *DecodeError
// naming the table, the key and the attribute. A listing (Workflows,
// Activities, ActivitiesInState, Dependents, Dependencies) skips the items
// it cannot decode and returns every other one together with a
// *SkippedError naming the skipped; Skipped tells that apart from a
// failure. Implementations report each undecodable item in their log, once
// in a while rather than at every read.
//
// Every call is bounded: a store that does not answer returns an
// *UnavailableError; a table that is not installed a *TableMissingError;
// a store that cannot be reached as configured a *ConfigError. All three
// match ErrUnavailable.
type Store interface {
	// CreateWorkflow writes a new execution: its request (if any), the
	// workflow item in WorkflowRequested, every activity (Requested) and
	// every dependency item. Writing the same input again while the workflow
	// is still REQUESTED is harmless, so a creator that died half-way can be
	// retried. If the request already started another execution, or the
	// execution has moved past REQUESTED, it returns an *ExistsError naming
	// that execution and writes nothing.
	CreateWorkflow(ctx context.Context, w *NewWorkflow) error

	// GetWorkflow reads a workflow execution (strongly consistent).
	GetWorkflow(ctx context.Context, workflowExecID string) (*WorkflowExec, error)

	// GetRequest reads a workflow request.
	GetRequest(ctx context.Context, workflowRequestID, workflowName string) (*WorkflowRequest, error)

	// UpdateWorkflow moves a workflow in one conditional write and returns the
	// item as written. A refused move returns a *ConflictError.
	UpdateWorkflow(ctx context.Context, workflowExecID string, c WorkflowChange) (*WorkflowExec, error)

	// Workflows lists executions, newest first, through an index (by state,
	// or by name). Index reads are eventually consistent; the items carry
	// no definition.
	Workflows(ctx context.Context, q WorkflowQuery) ([]*WorkflowExec, error)

	// GetActivity reads an activity execution (strongly consistent).
	GetActivity(ctx context.Context, key ActivityKey) (*ActivityExec, error)

	// Activities reads every activity of a workflow execution (strongly
	// consistent reads of the items an index lists), ordered by ID.
	Activities(ctx context.Context, workflowExecID string) ([]*ActivityExec, error)

	// ActivitiesInState lists the keys of activities in a live state
	// through an index, oldest state change first; a terminal state is
	// refused (the index is sparse: an activity that ended leaves it).
	// Index reads are eventually consistent: read the item before acting
	// on it.
	ActivitiesInState(ctx context.Context, q ActivityQuery) ([]ActivityRef, error)

	// UpdateActivity changes an activity in one conditional write and returns
	// the item as written. A refused write returns a *ConflictError carrying
	// what the item held; a missing item returns ErrNotFound.
	UpdateActivity(ctx context.Context, key ActivityKey, c ActivityChange) (*ActivityExec, error)

	// Heartbeat records a heartbeat of a RUNNING activity held by owner. It
	// touches no index key, so it costs one write unit. If the activity is no
	// longer RUNNING or another owner holds it, it returns a *ConflictError
	// saying what it holds.
	Heartbeat(ctx context.Context, key ActivityKey, owner string, at time.Time) error

	// Dependents lists the dependency items of the activities that wait on
	// activityExecID.
	Dependents(ctx context.Context, activityExecID string) ([]Dependency, error)

	// Dependencies lists every dependency item of a workflow execution.
	Dependencies(ctx context.Context, workflowExecID string) ([]Dependency, error)

	// Expire marks every item of a workflow execution (the workflow, its
	// request, its activities and its dependency items) to be deleted at
	// the given time: DynamoDB's TTL on the attribute expires_at.
	Expire(ctx context.Context, workflowExecID string, at time.Time) error

	// ResolveDependency removes upstreamID from the pending dependencies of
	// the waiting activity, exactly once: a replay removes nothing and
	// reports resolved=false. Either way it returns the waiting activity as
	// it now stands, so the caller sees whether anything is still pending.
	ResolveDependency(ctx context.Context, waiting ActivityKey, upstreamID string) (a *ActivityExec, resolved bool, err error)

	// CreateActivity writes one new activity item (a retry's next
	// attempt), only if no item has its key: if one has, it returns a
	// *ConflictError saying what that item holds, and writes nothing.
	CreateActivity(ctx context.Context, a *ActivityExec) error
}

// Installer creates what a store needs (tables, indexes) and is a no-op
// when everything is already there.
type Installer interface {
	Install(ctx context.Context, dryRun bool) ([]InstallAction, error)
}

// InstallAction is one thing Install did, or would do on a dry run.
type InstallAction struct {
	Object string // e.g. "table whimbrel_activity_exec"
	Action string // e.g. "create", "add index state-index", "record version 1"
}

// NewWorkflow is everything CreateWorkflow writes.
type NewWorkflow struct {
	Request      *WorkflowRequest // optional
	Exec         WorkflowExec     // State must be WorkflowRequested
	Activities   []ActivityExec   // State must be Requested
	Dependencies []Dependency
}

// WorkflowChange is one conditional move of a workflow.
type WorkflowChange struct {
	From   []WorkflowState // the workflow must be in one of these
	To     WorkflowState
	At     time.Time // when; a settled state records it as end_time (default now)
	Reason string    // why, for people; empty keeps the old reason
	// Outcome, when set, records the outcome the activities decided,
	// only if none is recorded yet; To may then be empty, to keep the
	// state (see WorkflowExec.Outcome).
	Outcome WorkflowState
	// DecidedBy and FinallyFailed are recorded when set (see
	// WorkflowExec).
	DecidedBy     string
	FinallyFailed string
}

// WorkflowQuery selects workflow executions.
type WorkflowQuery struct {
	State WorkflowState // only those in this state (empty: any)
	Name  string        // only those of this workflow (empty: any)
	Since time.Time     // only those started at or after this time (zero: all)
	Limit int           // at most this many (0: no limit)
}

// ActivityQuery selects activities by state.
type ActivityQuery struct {
	State  ActivityState
	Before time.Time // only those that entered the state before this time (zero: all)
	Limit  int       // at most this many (0: no limit)
}

// ActivityRef is what the state index holds of an activity.
type ActivityRef struct {
	ActivityKey
	StateTime time.Time
}

// ActivityChange is one conditional write to an activity. The write happens
// only if the item is in one of From (and, when Owner is set, is held by
// Owner); then the state becomes To (or stays, when To is empty) and the
// other fields that are set are recorded. Moving to Queued records the
// queued time, to Running the start time, to a terminal state the end time.
//
// The contract's preconditions are part of the condition: a move from
// REQUESTED to READY or QUEUED requires that nothing is pending, and a move
// to RUNNING requires a Claim with an owner.
type ActivityChange struct {
	From []ActivityState
	To   ActivityState // empty: keep the state, only record the fields
	// Owner fences the write: the item's owner must equal it. A wrapper that
	// lost its lease can then never overwrite a newer owner's record.
	Owner string
	// HeartbeatSeen, when set, makes the write conditional on no heartbeat
	// newer than the one the caller saw having landed (the zero time: none
	// at all), so a heartbeat landing in between wins over a timeout.
	HeartbeatSeen *time.Time
	At            time.Time // when (default now)

	// Claim, with To == Running, records the new owner and its settings,
	// and sets the attempt to 1 where the item has none (a retry's item
	// carries its own). With heartbeats enabled the same write records the
	// first heartbeat at the claim time, so that the activity is never
	// RUNNING without one; with them off, heartbeat_time_epoch is -1
	// (docs/contract.md#heartbeats-and-leases).
	Claim *Claim
	// Hold records a token as the owner without a claim: a launcher's move
	// to QUEUED, so that a launcher whose answer was lost can tell that the
	// move was its own.
	Hold string
	// LaunchedAs records what a launcher started (pid, container, task ARN).
	LaunchedAs string
	// Exit records how the command ended; with an empty To it also records
	// the end time (a wrapper finishing on a TIMED_OUT or CANCELLED_RUNNING
	// item).
	Exit *Exit
	// Error records an error text: the stderr tail or a launch error.
	Error string
	// Reason records why, for people.
	Reason string
	// Beat records a heartbeat at At, in a write that records more (a
	// progress, or a move of another attribute).
	Beat bool
	// RetriedBy links a FAILED or TIMED_OUT attempt to the attempt that
	// retries it: an attribute only, the state stays.
	RetriedBy string
	// Output records what the command wrote to WHIMBREL_OUTPUT (a compact
	// JSON object), with the outcome in the same write.
	Output string
	// Progress records the command's latest progress, at At; with Beat it
	// rides on a heartbeat.
	Progress string
	// Resolve, on a move from REQUESTED to READY, resolves the last
	// dependency in the same write: the write requires that this upstream
	// is the only one pending and removes it, instead of requiring that
	// nothing is pending. The edge is then removed exactly once, as by
	// ResolveDependency, and one write does the work of two.
	Resolve string
	// Skipped marks the activity as skipped (its when was false); see
	// ActivityExec.Skipped.
	Skipped bool
	// Swap, when set, makes the write also a compare-and-set of one String
	// attribute of the item (a map's account, see ActivityExec.Map).
	Swap *Swap
}

// Swap is a compare-and-set of one String attribute, made with an
// activity write: the write fails unless Attr holds Old (or, with Old
// empty, is absent), and sets it to New.
type Swap struct{ Attr, Old, New string }

// Claim is what a wrapper records when it takes an activity.
type Claim struct {
	Owner             string // a fresh token, unique to this attempt
	Host              string
	PID               int
	HeartbeatEnabled  bool
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
}

// Exit is how a command ended.
type Exit struct {
	Code   int    // exit status (128+N when killed by signal N)
	Signal string // the signal that killed it, if any
}
