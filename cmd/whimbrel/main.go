// Command whimbrel is Whimbrel's operator CLI: it installs the tables,
// starts workflows (or runs them here and now), and inspects, lists,
// cancels, reruns and counts their executions.
package main

import (
	"os"
	"strconv"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
)

const description = `Whimbrel runs workflows of containerised or local activities with no central
server: every participant coordinates through conditional writes to DynamoDB.

Examples:
  whimbrel run examples/etl.yaml        run a workflow here and now, on an embedded
                                        store in .whimbrel/ (nothing to set up)
  whimbrel install                      create the tables (region and credentials
                                        from the AWS SDK's default chain)
  whimbrel install --dry-run            say what install would create
  WHIMBREL_TABLE_PREFIX=dev_ whimbrel install
  AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:8000 whimbrel install
  whimbrel up                           serve the embedded store until Ctrl-C: runs what
                                        start --detach and schedules start; web view
  whimbrel start examples/etl.yaml                   start a workflow
  whimbrel start --request-id nightly-2026-11-21 --wait examples/etl.yaml
  whimbrel status nightly-etl::0b0e3c0f-…     what happened, activity by activity
  whimbrel list --state FAILED --since 7d      what failed this week
  whimbrel rerun --from-failure nightly-etl::0b0e3c0f-…
  whimbrel cancel nightly-etl::0b0e3c0f-…
  whimbrel stats --since 30d

The Simple Lambda API (clients only insert items; a processor does the rest):
  whimbrel register examples/etl.yaml          register a definition by name
  whimbrel request --wait nightly-etl          insert a workflow_request for it`

// Globals are the flags every command takes.
type Globals struct {
	cli.LogFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`
}

// CLI is the whole grammar of whimbrel.
type CLI struct {
	Globals

	Install InstallCmd `cmd:"" help:"Create Whimbrel's tables and indexes (a no-op when they exist)."`
	Start   StartCmd   `cmd:"" help:"Start a workflow from its definition; print its workflow_exec_id."`
	Run     RunCmd     `cmd:"" help:"Run a workflow to its end on this machine: start it, launch its activities locally, monitor them (embedded store by default)."`
	Status  StatusCmd  `cmd:"" help:"Show an execution: its state, and every activity's state, times, attempt, host, exit code, stderr tail, heartbeat age."`
	List    ListCmd    `cmd:"" help:"List executions, newest first."`
	Cancel  CancelCmd  `cmd:"" help:"Cancel an execution: pending activities CANCELLED, running ones stopped."`
	Rerun   RerunCmd   `cmd:"" help:"Start the execution's definition again; --from-failure runs only what had not completed."`
	Stats   StatsCmd   `cmd:"" help:"Count executions by state per workflow, with success rate and duration percentiles."`
	Up      UpCmd      `cmd:"" help:"Serve this folder's embedded store until Ctrl-C: launch its activities (output in .whimbrel/logs), fire its schedules, serve the web view. What start --detach and schedule set start then runs."`
	Web     WebCmd     `cmd:"" help:"Serve a live web view of the executions (DAG, states, attempts, stderr) and a JSON API; token required, read-only unless --allow-actions."`

	Register   RegisterCmd   `cmd:"" group:"Simple Lambda API" help:"Register a workflow definition by name, so that a workflow_request can start it."`
	Request    RequestCmd    `cmd:"" group:"Simple Lambda API" help:"Insert a workflow_request for a registered workflow; a processor (whimbrel-lambda, whimbrel-poller) starts it. Print its workflow_exec_id."`
	Registered RegisteredCmd `cmd:"" group:"Simple Lambda API" help:"List the registered workflows."`

	Pool PoolCmd `cmd:"" group:"Pools" help:"Share a scarce resource across every launcher and workflow: at most N activities of a pool hold its slots at once."`

	Schedule ScheduleCmd `cmd:"" group:"Schedules" help:"Start workflows by cron, by interval, or after another workflow's completions; every whimbrel-monitor and schedule tick fires each time once."`
}

func main() {
	if code, ok := groupGuardMain(); ok { // --supervise inline's guard process is this binary
		os.Exit(code)
	}
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel", Description: description,
		Vars: kong.Vars{"default_max_running": strconv.Itoa(defaultMaxRunning)}}, &c, &c.Globals)
}
