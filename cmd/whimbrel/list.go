package main

import (
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// ListCmd is `whimbrel list`.
type ListCmd struct {
	cli.StoreFlags
	State    string `name:"state" enum:",REQUESTED,RUNNING,COMPLETED,FAILED,CANCELLED" default:"" help:"Only executions in this state: REQUESTED, RUNNING, COMPLETED, FAILED or CANCELLED."`
	Workflow string `name:"workflow" help:"Only executions of this workflow."`
	Since    string `name:"since" default:"24h" help:"Only executions started this long ago or since (30m, 24h, 7d; 0 for all)."`
	Limit    int    `name:"limit" default:"50" help:"At most this many (0: all)."`
	JSON     bool   `name:"json" help:"Print JSON for scripts."`
}

// Run lists executions, newest first.
func (c *ListCmd) Run(g *Globals, k *kong.Context) error {
	since, err := parseAge(c.Since)
	if err != nil {
		return &cli.UsageError{Msg: "--since: " + err.Error()}
	}
	if c.Limit < 0 {
		return &cli.UsageError{Msg: "--limit must be 0 or more"}
	}
	return withSession(g, k, c.StoreFlags, reads, func(se *session) error {
		q := state.WorkflowQuery{State: state.WorkflowState(c.State), Name: c.Workflow, Limit: c.Limit}
		if since > 0 {
			q.Since = time.Now().Add(-since)
		}
		rows, err := inspect.List(se.ctx, se.st, q, time.Now())
		if err != nil {
			return err
		}
		if len(rows) == 0 && !c.JSON {
			fmt.Fprintf(k.Stderr, "no executions match in %s (--since %s)\n", se.where(c.Prefix), c.Since)
		}
		if c.JSON {
			if rows == nil {
				rows = []inspect.Workflow{}
			}
			return writeJSON(k.Stdout, rows)
		}
		return inspect.WriteList(k.Stdout, rows)
	})
}

// parseAge reads a duration that may be given in days ("7d"); "0" is none.
func parseAge(s string) (time.Duration, error) {
	if s == "0" || s == "" {
		return 0, nil
	}
	d, err := definition.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 30m, 24h or 7d", s)
	}
	return d, nil
}
