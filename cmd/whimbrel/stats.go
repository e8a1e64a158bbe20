package main

import (
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// StatsCmd is `whimbrel stats`.
type StatsCmd struct {
	cli.StoreFlags
	Since    string `name:"since" default:"7d" help:"Executions started this long ago or since (24h, 7d, 30d; 0 for all)."`
	Workflow string `name:"workflow" help:"Only this workflow."`
	JSON     bool   `name:"json" help:"Print JSON for scripts."`
}

// Run counts executions by state per workflow, with success rate and
// duration percentiles.
func (c *StatsCmd) Run(g *Globals, k *kong.Context) error {
	since, err := parseAge(c.Since)
	if err != nil {
		return &cli.UsageError{Msg: "--since: " + err.Error()}
	}
	return withSession(g, k, c.StoreFlags, reads, func(se *session) error {
		q := state.WorkflowQuery{Name: c.Workflow}
		if since > 0 {
			q.Since = time.Now().Add(-since)
		}
		stats, err := inspect.LoadStats(se.ctx, se.st, q)
		if err != nil {
			return err
		}
		if c.JSON {
			if stats == nil {
				stats = []inspect.Stats{}
			}
			return writeJSON(k.Stdout, stats)
		}
		return inspect.WriteStats(k.Stdout, stats)
	})
}
