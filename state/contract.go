package state

import "time"

// This file holds the values of the client contract that more than one
// layer must agree on: the wrapper, the launcher, the monitor, the CLI, the
// stores and the Simple Lambda API refer to these definitions instead of
// writing their own copies. Tunables private to one component (poll
// intervals, retry bounds, store call timeouts) stay in its package.

// Tables. Every table name is a prefix followed by one of the names below;
// both stores use them.
const (
	// DefaultTablePrefix is the contract's default table prefix
	// (docs/contract.md#tables).
	DefaultTablePrefix = "whimbrel_"

	TableInstallStatus      = "install_status"
	TableWorkflowRequest    = "workflow_request"
	TableActivityEvent      = "activity_event"
	TableWorkflowExec       = "workflow_exec"
	TableActivityExec       = "activity_exec"
	TableActivityDependency = "activity_exec_dependency"
	TableWorkflowLambda     = "workflow_lambda"
	// TablePool holds the pools: each one's definition and slot shards
	// (docs/contract.md#pools).
	TablePool = "pool"
)

// The lease a wrapper holds on a claimed activity
// (docs/contract.md#heartbeats-and-leases): as both DynamoDB lock clients
// do, it beats every 15 s and is lost after 4 missed beats.
// A claim records the interval and timeout it uses; the monitor applies
// DefaultHeartbeatTimeout to a claim that records none.
const (
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultHeartbeatTimeout  = 60 * time.Second
)

// Stopping a command.
const (
	// DefaultKillGrace is how long a command is given between SIGTERM and
	// SIGKILL when it is stopped (an activity's kill_grace, whimbrel-run's
	// --kill-grace): ECS's default stop timeout. The Docker backend gives
	// a container this plus a margin as its stop timeout.
	DefaultKillGrace = 30 * time.Second
)

// Limits on what a command hands the wrapper, in bytes.
const (
	// MaxOutput bounds an activity's output after compaction: it is
	// recorded on the activity item, which DynamoDB caps at 400 KB, and
	// read by every downstream activity.
	MaxOutput = 32 << 10
	// MaxProgress bounds a progress line: it rides on a heartbeat.
	MaxProgress = 1 << 10
)

// The data contract between the wrapper and its command: plain files named
// in the command's environment, so that a command in any language needs no
// SDK. The wrapper is the only participant that reads what the command
// writes; it creates the files in a fresh directory of its own (inside the
// container, for Docker and ECS), so no volume is needed.
const (
	// EnvInputs names a JSON file the wrapper writes before the command
	// starts: {"params": {...}, "outputs": {"<upstream>": {...}, ...}}.
	EnvInputs = "WHIMBREL_INPUTS"
	// EnvOutput names a file the command may write: a JSON object that is
	// recorded with the outcome when the command exits 0.
	EnvOutput = "WHIMBREL_OUTPUT"
	// EnvProgress names a file the command may overwrite at any time with
	// a short line or a JSON object; the next heartbeat carries it.
	EnvProgress = "WHIMBREL_PROGRESS"
)

// What a launcher hands whimbrel-run in its environment (whimbrel-run's
// flags of the same names): the activity to run, and the settings of its
// definition that are set. Durations are in Go's notation ("1m30s").
const (
	EnvActivityExecID    = "WHIMBREL_ACTIVITY_EXEC_ID"
	EnvActivityName      = "WHIMBREL_ACTIVITY_NAME"
	EnvWorkflowExecID    = "WHIMBREL_WORKFLOW_EXEC_ID"
	EnvWorkflowName      = "WHIMBREL_WORKFLOW_NAME"
	EnvHeartbeatInterval = "WHIMBREL_HEARTBEAT_INTERVAL"
	EnvHeartbeatTimeout  = "WHIMBREL_HEARTBEAT_TIMEOUT"
	EnvTimeout           = "WHIMBREL_TIMEOUT"
	EnvKillGrace         = "WHIMBREL_KILL_GRACE"
	// EnvGuardFD names the descriptor of a guard pipe a local launcher
	// hands the wrapper (whimbrel-run's --guard-fd): the launcher stops
	// the command's process group if the wrapper is killed outright, so
	// the wrapper starts no guard process of its own.
	EnvGuardFD = "WHIMBREL_GUARD_FD"
)

// Exit statuses of whimbrel-run's own outcomes, recorded as the activity's
// exit code when the command's own status is not what ended it. Otherwise
// whimbrel-run exits with the command's status, or 128+N when the command
// died of signal N. 125 to 127 follow the convention of env(1), nohup(1)
// and docker run, so a caller can tell a wrapper failure from a command
// failure.
const (
	// ExitDataRefused: the activity FAILED over its data: a template of
	// its command or env could not be resolved (the command was not
	// started), or the command exited 0 but its WHIMBREL_OUTPUT file is
	// not a JSON object within MaxOutput.
	ExitDataRefused = 121
	// ExitClaimRefused: the activity could not be claimed (another
	// participant holds it, it is in a state that cannot start, or its
	// workflow is not RUNNING). The command was not started.
	ExitClaimRefused = 122
	// ExitNotRecorded: the command ran, but its outcome could not be
	// written to the store within the record timeout. The outcome is in
	// the wrapper's log.
	ExitNotRecorded = 123
	// ExitTimeout: the command ran longer than --timeout and was stopped,
	// as timeout(1) reports it.
	ExitTimeout = 124
	// ExitWrapperError: the wrapper itself failed (a usage error, an
	// unreachable store, a lost exit status).
	ExitWrapperError = 125
	// ExitCannotExecute: the command exists but could not be executed.
	ExitCannotExecute = 126
	// ExitNotFound: the command could not be found.
	ExitNotFound = 127
)
