package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/internal/cli"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// open is what every operator command does first.
func open(g *Globals, k *kong.Context, f cli.StoreFlags) (context.Context, context.CancelFunc, cli.Store, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	st, err := f.Open(ctx, g.Logger("whimbrel", k.Stderr))
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return ctx, func() { st.Close(); stop() }, st, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// StatusCmd is `whimbrel status`.
type StatusCmd struct {
	cli.StoreFlags
	ID   string `arg:"" name:"workflow-exec-id" help:"The execution, as start printed it."`
	JSON bool   `name:"json" help:"Print JSON for scripts."`
}

// Run shows the execution and its activities.
func (c *StatusCmd) Run(g *Globals, k *kong.Context) error {
	ctx, stop, st, err := open(g, k, c.StoreFlags)
	if err != nil {
		return err
	}
	defer stop()
	s, err := inspect.Load(ctx, st, c.ID, time.Now())
	if errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("no workflow execution %s under prefix %q: check the ID (whimbrel list shows the recent ones) and WHIMBREL_TABLE_PREFIX", c.ID, c.Prefix)
	}
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(k.Stdout, s)
	}
	return s.WriteText(k.Stdout)
}

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
	ctx, stop, st, err := open(g, k, c.StoreFlags)
	if err != nil {
		return err
	}
	defer stop()
	q := state.WorkflowQuery{State: state.WorkflowState(c.State), Name: c.Workflow, Limit: c.Limit}
	if since > 0 {
		q.Since = time.Now().Add(-since)
	}
	rows, err := inspect.List(ctx, st, q, time.Now())
	if err != nil {
		return err
	}
	if c.JSON {
		if rows == nil {
			rows = []inspect.Workflow{}
		}
		return writeJSON(k.Stdout, rows)
	}
	return inspect.WriteList(k.Stdout, rows)
}

// parseAge reads a duration that may be given in days ("7d"); "0" is none.
func parseAge(s string) (time.Duration, error) {
	if s == "0" || s == "" {
		return 0, nil
	}
	d, err := workflow.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 30m, 24h or 7d", s)
	}
	return d, nil
}

// CancelCmd is `whimbrel cancel`.
type CancelCmd struct {
	cli.StoreFlags
	ID     string `arg:"" name:"workflow-exec-id" help:"The execution to cancel."`
	Reason string `name:"reason" help:"Why, for the record."`
}

// Run cancels the execution.
func (c *CancelCmd) Run(g *Globals, k *kong.Context) error {
	ctx, stop, st, err := open(g, k, c.StoreFlags)
	if err != nil {
		return err
	}
	defer stop()
	reason := c.Reason
	if reason == "" {
		reason = "cancelled by an operator"
	}
	res, err := workflow.Cancel(ctx, st, c.ID, reason, nil)
	var ce *state.ConflictError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("workflow %s is %s: it has settled, so there is nothing to cancel", c.ID, ce.State)
	case errors.Is(err, state.ErrNotFound):
		return fmt.Errorf("no workflow execution %s: check the ID (whimbrel list shows the recent ones)", c.ID)
	case err != nil:
		return err
	}
	if res.Workflow {
		fmt.Fprintf(k.Stdout, "cancelled workflow %s\n", c.ID)
	} else {
		fmt.Fprintf(k.Stdout, "workflow %s was already cancelled\n", c.ID)
	}
	fmt.Fprintf(k.Stdout, "  %d pending activities cancelled, %d running ones told to stop (their wrappers stop them at the next heartbeat)\n",
		len(res.Pending), len(res.Running))
	if n := len(res.Undecodable); n > 0 {
		fmt.Fprintf(k.Stdout, "  %d activities could not be decoded and were left as they are (see the warnings on stderr): fix or delete them\n", n)
	}
	return nil
}

// RerunCmd is `whimbrel rerun`.
type RerunCmd struct {
	cli.StoreFlags
	ID          string `arg:"" name:"workflow-exec-id" help:"The execution whose definition to run again."`
	FromFailure bool   `name:"from-failure" help:"Redrive: record what completed before as COMPLETED and run only the rest."`
	RequestID   string `name:"request-id" help:"Names the request: the same ID never starts a second execution."`
}

// Run starts the new execution and prints its workflow_exec_id.
func (c *RerunCmd) Run(g *Globals, k *kong.Context) error {
	ctx, stop, st, err := open(g, k, c.StoreFlags)
	if err != nil {
		return err
	}
	defer stop()
	id, err := workflow.Rerun(ctx, st, c.ID, c.FromFailure, workflow.StartOptions{RequestID: c.RequestID})
	if err != nil {
		return err
	}
	fmt.Fprintln(k.Stdout, id)
	return nil
}

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
	ctx, stop, st, err := open(g, k, c.StoreFlags)
	if err != nil {
		return err
	}
	defer stop()
	q := state.WorkflowQuery{Name: c.Workflow}
	if since > 0 {
		q.Since = time.Now().Add(-since)
	}
	wfs, err := st.Workflows(ctx, q)
	if _, err := state.Skipped(err); err != nil { // a malformed one is reported by the store
		return err
	}
	stats := inspect.Compute(wfs)
	if c.JSON {
		if stats == nil {
			stats = []inspect.Stats{}
		}
		return writeJSON(k.Stdout, stats)
	}
	return inspect.WriteStats(k.Stdout, stats)
}
