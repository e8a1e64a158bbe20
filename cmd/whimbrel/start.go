package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// StartCmd is `whimbrel start`.
type StartCmd struct {
	cli.StoreFlags
	HereFlags
	File      string        `arg:"" name:"file" help:"The workflow definition (YAML or JSON)."`
	RequestID string        `name:"request-id" help:"Names the request: the same ID never starts a second execution, it answers with the first."`
	Wait      bool          `name:"wait" help:"Wait until the workflow settles; exit 0 only if it COMPLETED."`
	Every     time.Duration `name:"wait-interval" default:"1s" help:"How often --wait looks."`
	Retention string        `name:"retention" help:"Keep the execution's items this long after it settles (30d, 72h; DynamoDB's TTL deletes them then). Overrides the definition's retention."`
	Detach    bool          `name:"detach" help:"On the embedded store: only start the workflow, print its workflow_exec_id and say how to start a launcher (default: run it to its end here, as whimbrel run does)."`
	ParamFlags
}

// Run starts the workflow and prints its workflow_exec_id.
func (c *StartCmd) Run(g *Globals, k *kong.Context) error {
	if err := checkRequestID(c.RequestID); err != nil {
		return err
	}
	if c.Every <= 0 {
		return &cli.UsageError{Msg: "--wait-interval must be positive"}
	}
	def, err := load(c.File, k.Stderr)
	if err != nil {
		return err
	}
	if err := applyRetention(def, c.Retention); err != nil {
		return err
	}
	params, err := c.bind(def)
	if err != nil {
		return err
	}
	se, err := open(g, k, c.StoreFlags, writes)
	if err != nil {
		return err
	}
	defer se.close()
	if err := resolveRegistered(se.ctx, se.st, def); err != nil {
		return err
	}
	runsHere := se.choice.Embedded() && !c.Detach // no launcher may watch a file on this machine: run it here
	start := func(ctx context.Context) (string, error) {
		id, created, err := workflow.Start(ctx, se.st, def, workflow.StartOptions{RequestID: c.RequestID, Source: "whimbrel start", Params: params, LaunchedHere: runsHere})
		if err == nil && !created {
			fmt.Fprintf(k.Stderr, "request %s already started %s\n", c.RequestID, id)
		}
		return id, err
	}
	if runsHere {
		h := here{HereFlags: c.HereFlags, choice: se.choice, prefix: c.Prefix, log: g.QuietLogger("whimbrel", k.Stderr), params: params}
		return h.run(context.Background(), k, se.st, def, start)
	}
	id, err := start(se.ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(k.Stdout, id)
	if se.choice.Embedded() && !c.Wait {
		fmt.Fprintln(k.Stderr, detachHint(id, se.choice))
	}
	if !c.Wait {
		return nil
	}
	return waitSettled(se.ctx, se.st, id, c.Every, se.log, k)
}

// waitSettled waits until the workflow settles (see workflow.Wait), says
// how it ended, and fails unless it COMPLETED.
func waitSettled(ctx context.Context, st state.Store, id string, every time.Duration, log hclog.Logger, k *kong.Context) error {
	wf, err := workflow.Wait(ctx, st, id, every, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(k.Stderr, "workflow %s %s: %s\n", id, wf.State, wf.Reason)
	return settled(wf)
}
