package main

import (
	"errors"
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// CancelCmd is `whimbrel cancel`.
type CancelCmd struct {
	cli.StoreFlags
	ID     string `arg:"" name:"workflow-exec-id" help:"The execution to cancel."`
	Reason string `name:"reason" help:"Why, for the record."`
}

// Run cancels the execution.
func (c *CancelCmd) Run(g *Globals, k *kong.Context) error {
	se, err := open(g, k, c.StoreFlags, writes)
	if err != nil {
		return err
	}
	defer se.close()
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
}
