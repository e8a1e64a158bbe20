package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// RerunCmd is `whimbrel rerun`.
type RerunCmd struct {
	cli.StoreFlags
	HereFlags
	ID          string `arg:"" name:"workflow-exec-id" help:"The execution whose definition to run again."`
	FromFailure bool   `name:"from-failure" help:"Redrive: record what completed before as COMPLETED and run only the rest."`
	Again       bool   `name:"again" help:"With --from-failure: start a new redrive even when the execution was redriven before."`
	RequestID   string `name:"request-id" help:"Names the request: the same ID never starts a second execution."`
	Detach      bool   `name:"detach" help:"On the embedded store: only start the execution, print its workflow_exec_id and say how to start a launcher (default: run it to its end here, as whimbrel run does)."`
}

// Run starts the new execution and prints its workflow_exec_id. On the
// embedded store, where no launcher may be watching, it runs the
// execution to its end here unless told --detach.
func (c *RerunCmd) Run(g *Globals, k *kong.Context) error {
	if err := checkRequestID(c.RequestID); err != nil {
		return err
	}
	se, err := open(g, k, c.StoreFlags, writes)
	if err != nil {
		return err
	}
	defer se.close()
	runsHere := se.choice.Embedded() && !c.Detach
	rerun := func(ctx context.Context) (string, error) {
		return workflow.Rerun(ctx, se.st, c.ID, c.FromFailure, workflow.StartOptions{RequestID: c.RequestID, Again: c.Again, LaunchedHere: runsHere})
	}
	if runsHere {
		wf, err := se.st.GetWorkflow(se.ctx, c.ID)
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("no workflow execution %s in %s: check the ID (whimbrel list shows the recent ones)", c.ID, se.where(c.Prefix))
		}
		if err != nil {
			return fmt.Errorf("rerun %s: %w", c.ID, err)
		}
		def, err := definition.FromJSON(wf.Definition)
		if err != nil {
			return fmt.Errorf("rerun %s: it has no definition Whimbrel can read: %w", c.ID, err)
		}
		log := g.QuietLogger("whimbrel", k.Stderr)
		h := here{HereFlags: c.HereFlags, choice: se.choice, prefix: c.Prefix, log: log}
		return h.run(context.Background(), k, se.st, def, rerun)
	}
	id, err := rerun(se.ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(k.Stdout, id)
	if se.choice.Embedded() {
		fmt.Fprintln(k.Stderr, detachHint(id, se.choice))
	}
	return nil
}
