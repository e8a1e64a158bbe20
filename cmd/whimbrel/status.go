package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// StatusCmd is `whimbrel status`.
type StatusCmd struct {
	cli.StoreFlags
	ID   string `arg:"" name:"workflow-exec-id" help:"The execution, as start printed it."`
	JSON bool   `name:"json" help:"Print JSON for scripts."`
	Tree bool   `name:"tree" help:"Show each child workflow's status in place, under the activity that runs it."`
	// The elements of for_each maps (docs/for-each.md).
	Items    bool   `name:"items" help:"List the elements of the workflow's for_each maps, a page at a time, instead of its activities."`
	Activity string `name:"activity" help:"With --items: only this map's elements."`
	State    string `name:"state" help:"With --items: only the elements in this state, e.g. FAILED."`
	Page     int    `name:"page" default:"1" help:"With --items: which page (from 1)."`
	PageSize int    `name:"page-size" default:"50" help:"With --items: elements per page."`
}

// Run shows the execution and its activities.
func (c *StatusCmd) Run(g *Globals, k *kong.Context) error {
	return withSession(g, k, c.StoreFlags, reads, func(se *session) error {
		if c.Items {
			return c.items(se, k)
		}
		load := inspect.Load
		if c.Tree {
			load = inspect.LoadTree
		}
		s, err := load(se.ctx, se.st, c.ID, time.Now())
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("no workflow execution %s in %s: check the ID (whimbrel list shows the recent ones), --store/WHIMBREL_STORE and WHIMBREL_TABLE_PREFIX", c.ID, se.where(c.Prefix))
		}
		if err != nil {
			return err
		}
		if c.JSON {
			return writeJSON(k.Stdout, s)
		}
		return s.WriteTextColors(k.Stdout, inspect.ColorsFor(k.Stdout))
	})
}

// CancelCmd is `whimbrel cancel`.
type CancelCmd struct {
	cli.StoreFlags
	ID     string `arg:"" name:"workflow-exec-id" help:"The execution to cancel."`
	Reason string `name:"reason" help:"Why, for the record."`
}

// Run cancels the execution.
func (c *CancelCmd) Run(g *Globals, k *kong.Context) error {
	return withSession(g, k, c.StoreFlags, writes, func(se *session) error {
		reason := c.Reason
		if reason == "" {
			reason = "cancelled by an operator"
		}
		res, err := workflow.Cancel(se.ctx, se.st, c.ID, reason, nil)
		var ce *state.ConflictError
		switch {
		case errors.As(err, &ce):
			return fmt.Errorf("workflow %s is %s: it has settled, so there is nothing to cancel", c.ID, ce.State)
		case errors.Is(err, state.ErrNotFound):
			return fmt.Errorf("no workflow execution %s in %s: check the ID (whimbrel list shows the recent ones)", c.ID, se.where(c.Prefix))
		case err != nil:
			return err
		}
		return inspect.WriteCancelled(k.Stdout, c.ID, res)
	})
}
