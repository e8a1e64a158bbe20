package main

import (
	"os"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
)

// CLI is the whole grammar of whimbrel-run.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	ActivityExecID string `name:"activity-exec-id" env:"WHIMBREL_ACTIVITY_EXEC_ID" placeholder:"NAME::UUID" help:"The activity execution to run."`
	ActivityName   string `name:"activity-name" env:"WHIMBREL_ACTIVITY_NAME" help:"The activity's name (checked against the ID)."`
	WorkflowExecID string `name:"workflow-exec-id" env:"WHIMBREL_WORKFLOW_EXEC_ID" placeholder:"NAME::UUID" help:"The workflow execution it belongs to."`
	WorkflowName   string `name:"workflow-name" env:"WHIMBREL_WORKFLOW_NAME" help:"The workflow's name (checked against the ID)."`

	HeartbeatInterval      time.Duration `name:"heartbeat-interval" env:"WHIMBREL_HEARTBEAT_INTERVAL" default:"${default_heartbeat_interval}" help:"Time between heartbeats."`
	HeartbeatTimeout       time.Duration `name:"heartbeat-timeout" env:"WHIMBREL_HEARTBEAT_TIMEOUT" default:"${default_heartbeat_timeout}" help:"Without a landed heartbeat for this long the lease is lost and CMD is stopped; the monitor times the activity out after it. At least twice the interval."`
	NoHeartbeat            bool          `name:"no-heartbeat" help:"Do not heartbeat (the monitor then never times the activity out, and cancellation is not noticed)."`
	KeepRunningOnLeaseLoss bool          `name:"keep-running-on-lease-loss" help:"When the activity is timed out or the lease is lost, let CMD run to its end instead of stopping it. The state is not changed. Cancellation still stops CMD."`
	KillGrace              time.Duration `name:"kill-grace" env:"WHIMBREL_KILL_GRACE" default:"${default_kill_grace}" help:"Time between SIGTERM and SIGKILL when CMD is stopped."`
	Timeout                time.Duration `name:"timeout" env:"WHIMBREL_TIMEOUT" default:"0s" help:"Stop CMD and record FAILED if it runs longer than this (0: no limit)."`
	RecordTimeout          time.Duration `name:"record-timeout" default:"${default_record_timeout}" help:"How long to retry recording the outcome through store errors."`
	Subreaper              bool          `name:"subreaper" help:"Reap orphaned descendants even when not PID 1 (PR_SET_CHILD_SUBREAPER). Without it, and when not PID 1, whimbrel-run warns."`
	SignalChildOnly        bool          `name:"signal-child-only" env:"WHIMBREL_SIGNAL_CHILD_ONLY" help:"Relay signals to CMD alone, not to its whole process group (tini's default; the default here is the group, as tini -g). Stopping CMD always signals the group."`
	Guard                  bool          `name:"guard" env:"WHIMBREL_GUARD" default:"true" negatable:"" help:"When not PID 1, run a guard process that stops CMD's process group (SIGTERM, then SIGKILL after --kill-grace) if whimbrel-run is killed outright (kill -9); under a local launcher (--guard-fd) the launcher is the guard. --no-guard saves that process."`
	GuardFD                int           `name:"guard-fd" env:"WHIMBREL_GUARD_FD" hidden:"" help:"Descriptor of a guard pipe whose other end the supervising launcher watches: it is the guard, and no guard process is started (set by the local launcher)."`
	ParentDeathSignal      string        `name:"parent-death-signal" env:"WHIMBREL_PARENT_DEATH_SIGNAL" placeholder:"SIG" help:"Signal whimbrel-run itself gets when its parent dies (as tini -p), e.g. SIGTERM: CMD is then stopped and the outcome recorded."`
	Nudge                  string        `name:"nudge" env:"WHIMBREL_LAUNCHER_NUDGE" hidden:"" help:"Address of a local launcher to wake when dependents become READY (set by the local launcher)."`
	DataDir                string        `name:"data-dir" env:"WHIMBREL_DATA_DIR" type:"path" help:"Where to make the directory of the WHIMBREL_INPUTS, WHIMBREL_OUTPUT and WHIMBREL_PROGRESS files (default: the system's temporary directory). It is removed when the outcome is recorded."`
	API                    string        `name:"api" env:"WHIMBREL_API" enum:"full,simple" default:"full" help:"How to keep the client contract: 'full' writes the activity and advances the workflow itself; 'simple' writes activity events that a Simple Lambda API processor applies."`

	Command []string `arg:"" passthrough:"partial" name:"cmd" help:"The command to run, after --."`

	// signals are the termination signals, caught from the start of main.
	signals chan os.Signal `kong:"-"`
}
