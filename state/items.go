package state

import "time"

// The item types mirror the contract's seven tables
// (docs/contract.md#tables). Their attribute names are the contract's; the
// Store maps the fields to them. A zero time means the
// attribute is absent (or, for the *_epoch indexes, negative).

// InstallStatus records the installed version of one object (a table).
type InstallStatus struct {
	ObjectID    string // object_id, e.g. the table's name without prefix
	ObjectType  string // object_type, e.g. "table"
	Version     int    // version
	Description string // description
}

// WorkflowRequest records a request to start a workflow. Write-once.
type WorkflowRequest struct {
	WorkflowRequestID string    // workflow_request_id, `(workflow_name)::(uuid)`
	WorkflowName      string    // workflow_name
	When              time.Time // when, when_epoch
	Source            string    // source: who or what asked
	// Manual is true when the Full Logic API made the request, so Lambda
	// processors leave it alone. False is not written, as the contract asks.
	Manual bool // manual
	// WorkflowExecID is the execution the request started (an addition to
	// the base contract, so a repeated request can answer with it).
	WorkflowExecID string // workflow_exec_id
	// Params are the parameters of the execution to start, as a JSON
	// object (an addition to the base contract; see WorkflowExec.Params).
	Params string // params
	// Outcome is what a Simple Lambda API processor did with the request.
	Outcome Outcome
}

// ActivityEvent records a requested transition of an activity: the Simple
// Lambda API's one write, which a processor applies. Clients write it once;
// the processor then records its Outcome on it.
type ActivityEvent struct {
	ActivityEventID string    // activity_event_id, `(activity_exec_id)::(uuid)`
	ActivityExecID  string    // activity_exec_id
	WorkflowExecID  string    // workflow_exec_id: with activity_exec_id, the activity's key (optional)
	WorkflowName    string    // workflow_name (optional: it is in workflow_exec_id)
	ActivityName    string    // activity_name (optional)
	When            time.Time // when, when_epoch: orders events the state machine does not
	Source          string    // source
	Manual          bool      // manual
	// Transition is the state asked for, e.g. "COMPLETED", or
	// TransitionHeartbeat.
	Transition string // transition

	// Owner is the token of the wrapper that sent the event: a RUNNING
	// event claims the activity for it, and the later events of that
	// wrapper are fenced by it. Empty: the event's ID claims, and nothing
	// is fenced.
	Owner string // owner
	Host  string // host
	PID   int    // pid
	// Heartbeat settings a RUNNING event claims with.
	HeartbeatEnabled  bool          // heartbeat_enabled
	HeartbeatInterval time.Duration // heartbeat_interval (seconds)
	HeartbeatTimeout  time.Duration // heartbeat_timeout (seconds)
	// How the command ended, for COMPLETED and FAILED.
	ExitCode *int   // exit_code
	Signal   string // signal
	Error    string // error
	Reason   string // reason
	// Output is the command's output (a JSON object) a COMPLETED event
	// records; Progress the progress a HEARTBEAT or final event carries.
	Output   string // output
	Progress string // progress

	// Outcome is what the processor did with the event.
	Outcome Outcome
}

// Outcome records what a Simple Lambda API processor did with a request or
// an event. The zero Outcome: not processed yet.
type Outcome struct {
	Result string    // outcome: one of the Outcome* constants
	Reason string    // outcome_reason: why, for people
	At     time.Time // processed_time
}

// WorkflowExec is one execution of a workflow.
type WorkflowExec struct {
	WorkflowExecID    string        // workflow_exec_id, `(workflow_name)::(uuid)`
	WorkflowName      string        // workflow_name
	State             WorkflowState // state
	WorkflowRequestID string        // workflow_request_id, optional
	StartTime         time.Time     // start_time, start_time_epoch: when it was queued
	EndTime           time.Time     // end_time, end_time_epoch: when it settled
	Source            string        // source: who started it
	// Definition is the workflow definition the execution runs, as given, so
	// it can be inspected and rerun.
	Definition string // definition
	// Reason says why the workflow is in its state, for people.
	Reason string // reason
	// Expires is when the execution's items are deleted (zero: never).
	Expires time.Time // expires_at (epoch seconds)
	// Params are the execution's parameters, as a JSON object of strings
	// (empty: none), checked against the definition before it was written.
	Params string // params

	// Outcome is the state the workflow's activities decided, recorded
	// while its finally activities run; DecidedBy names the activity
	// that decided it; FinallyFailed names the finally activities that
	// did not complete (docs/contract.md#control-flow).
	Outcome       WorkflowState // outcome
	DecidedBy     string        // decided_by
	FinallyFailed string        // finally_failed

	// Parent names, for a child workflow, the activity that runs it and
	// that activity's workflow (docs/contract.md#child-workflows).
	Parent
}

// Parent is the link of a child workflow's items to the activity that
// runs it; both empty for a workflow that is nobody's child.
type Parent struct {
	ParentWorkflowExecID string // parent_workflow_exec_id
	ParentActivityExecID string // parent_activity_exec_id
}

// Key is the primary key of the parent activity.
func (p Parent) Key() ActivityKey {
	return ActivityKey{ActivityExecID: p.ParentActivityExecID, WorkflowExecID: p.ParentWorkflowExecID}
}

// ActivityKey is the primary key of an activity execution item.
type ActivityKey struct {
	ActivityExecID string // activity_exec_id, hash key
	WorkflowExecID string // workflow_exec_id, range key
}

// ActivityExec is one execution of an activity.
type ActivityExec struct {
	ActivityKey
	WorkflowName string        // workflow_name
	ActivityName string        // activity_name
	State        ActivityState // state
	// StateTime is when the item entered its state; the state index sorts by
	// it, so a sweep can ask for items stuck in a state since before a time.
	StateTime time.Time // state_time, state_time_epoch

	QueuedTime time.Time // queued_time, queued_time_epoch
	StartTime  time.Time // start_time, start_time_epoch (-1 until started)
	EndTime    time.Time // end_time, end_time_epoch

	// HeartbeatEnabled is true if the activity must heartbeat while running.
	HeartbeatEnabled  bool          // heartbeat_enabled
	HeartbeatTime     time.Time     // heartbeat_time, heartbeat_time_epoch: the claim writes the first (-1 when heartbeats are off)
	HeartbeatInterval time.Duration // heartbeat_interval (seconds)
	HeartbeatTimeout  time.Duration // heartbeat_timeout (seconds)

	// PendingDependencies lists the activity_exec_ids this activity still
	// waits on. Each is removed exactly once when it completes; the activity
	// is READY when none remain.
	PendingDependencies []string // pending_dependencies (string set)

	Owner string // owner: the token of the wrapper that claimed it
	// Attempt is which run of the activity this item is: 1 for the first
	// (the claim writes it where absent), n+1 for the retry of attempt n
	// (written when the retry is created, and kept by its claim).
	Attempt int    // attempt
	Host    string // host the wrapper runs on
	PID     int    // pid of the wrapper
	// LaunchedAs says what the launcher started: a pid, container ID or task
	// ARN.
	LaunchedAs string // launched_as

	ExitCode *int   // exit_code of the command, when it exited
	Signal   string // signal that killed the command, e.g. "SIGKILL"
	Error    string // error: the tail of the command's stderr, or a launch error
	// Reason says why the activity is in its state, for people.
	Reason string // reason
	// Expires is when the item is deleted (zero: never).
	Expires time.Time // expires_at (epoch seconds)
	// RetryOf is the activity_exec_id of the failed attempt this item
	// retries; RetriedBy, on a FAILED or TIMED_OUT item, that of the
	// attempt that retries it. Both are empty when no retry is involved.
	RetryOf   string // retry_of
	RetriedBy string // retried_by
	// NotBefore is when a retry becomes launchable: launchers leave a
	// READY item alone until then (zero: at once).
	NotBefore time.Time // not_before (epoch seconds)
	// EventCursor is the Simple Lambda API processor's count of the
	// events decided for this activity, and the last one (see
	// simpleapi/inbox.Step).
	EventCursor string // event_cursor

	// Output is what the command wrote to WHIMBREL_OUTPUT: a compact JSON
	// object, recorded with the outcome (empty: none).
	Output string // output
	// Progress is the latest progress the command wrote to
	// WHIMBREL_PROGRESS, carried by a heartbeat, and when it landed.
	Progress     string    // progress
	ProgressTime time.Time // progress_time, progress_time_epoch

	// Skipped marks an activity whose when was false: it moves through
	// the contract's states to COMPLETED without running, so a client
	// that knows only the base contract sees it finished
	// (docs/contract.md#control-flow).
	Skipped bool // skipped

	// Parent names, on the activities of a child workflow, the activity
	// that runs the workflow (docs/contract.md#child-workflows).
	Parent

	// A for_each activity is one item that stands for the whole map (its
	// parent) and one item per element of its list (docs/for-each.md).
	// Map is the parent's account of its items, a compact JSON object
	// changed only by compare-and-set (see MapState). ItemIndex and Item
	// are an element's: its place in the list and its JSON value.
	Map       string // map
	ItemIndex *int   // item_index (absent: not an element of a map)
	Item      string // item
	// MapShard is, on the first attempt of element k of a map (k below
	// MapShards), the count of shard k: which elements of the shard are
	// final, and how they ended (see MapShard).
	MapShard string // map_shard
}

// Dependency records that one activity waits on another. Write-once.
type Dependency struct {
	ID                      string // activity_exec_dependency, `(activity_exec_id):(index)`
	ActivityExecID          string // activity_exec_id: the activity that waits
	WorkflowExecID          string // workflow_exec_id
	DependentActivityExecID string // dependent_activity_exec_id: the activity waited on
}

// WorkflowLambda registers a workflow for the Simple Lambda API: its
// definition, so that a request can name it, and the Lambda function (or
// poller) that handles it.
type WorkflowLambda struct {
	WorkflowName string // workflow_name
	// Lambda names the function that handles the workflow's requests and
	// events; empty: any processor does.
	Lambda     string    // lambda
	Definition string    // definition: the workflow definition, as JSON
	Registered time.Time // registered_time
	Source     string    // source: who registered it
}
