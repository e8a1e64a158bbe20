package main

import (
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/cli"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// StartCmd is `whimbrel start`.
type StartCmd struct {
	cli.StoreFlags
	File      string        `arg:"" name:"file" help:"The workflow definition (YAML or JSON)."`
	RequestID string        `name:"request-id" help:"Names the request: the same ID never starts a second execution, it answers with the first."`
	Wait      bool          `name:"wait" help:"Wait until the workflow settles; exit 0 only if it COMPLETED."`
	Every     time.Duration `name:"wait-interval" default:"1s" help:"How often --wait looks."`
	Retention string        `name:"retention" help:"Keep the execution's items this long after it settles (30d, 72h; DynamoDB's TTL deletes them then). Overrides the definition's retention."`
	ParamFlags
}

// applyRetention overrides the definition's retention with a flag's value.
func applyRetention(def *workflow.Definition, flag string) error {
	if flag == "" {
		return nil
	}
	d, err := workflow.ParseDuration(flag)
	if err != nil || d <= 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--retention %q: give a positive duration such as 30d or 72h", flag)}
	}
	def.Retention = workflow.Duration(d)
	return nil
}

// Run starts the workflow and prints its workflow_exec_id.
func (c *StartCmd) Run(g *Globals, k *kong.Context) error {
	if c.Every <= 0 {
		return &cli.UsageError{Msg: "--wait-interval must be positive"}
	}
	def, err := workflow.Load(c.File)
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := c.Open(ctx, g.Logger("whimbrel", k.Stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	id, created, err := workflow.Start(ctx, st, def, workflow.StartOptions{RequestID: c.RequestID, Source: "whimbrel start", Params: params})
	if err != nil {
		return err
	}
	if !created {
		fmt.Fprintf(k.Stderr, "request %s already started %s\n", c.RequestID, id)
	}
	fmt.Fprintln(k.Stdout, id)
	if !c.Wait {
		return nil
	}
	return waitSettled(ctx, st, id, c.Every, g.Logger("whimbrel", k.Stderr), k)
}

// waitSettled waits until the workflow settles, and fails unless it
// COMPLETED. A workflow not written yet (a request a processor has not
// started) is waited for too.
func waitSettled(ctx context.Context, st state.Store, id string, every time.Duration, log hclog.Logger, k *kong.Context) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		wf, err := st.GetWorkflow(ctx, id)
		if err != nil && !errors.Is(err, state.ErrNotFound) {
			// A passing store error must not end the wait.
			log.Warn("reading the workflow failed; trying again", "error", err)
		}
		if err == nil && wf.State.Terminal() {
			fmt.Fprintf(k.Stderr, "workflow %s %s: %s\n", id, wf.State, wf.Reason)
			if wf.State != state.WorkflowCompleted {
				return &cli.ExitError{Code: cli.ExitFailure}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("stopped waiting for workflow %s", id)
			}
			return fmt.Errorf("stopped waiting; workflow %s is still %s", id, wf.State)
		case <-t.C:
		}
	}
}
