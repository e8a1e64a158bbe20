package main

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// The Simple Lambda API's operator commands: register definitions, insert
// requests, and see what is registered.

// RegisterCmd is `whimbrel register`.
type RegisterCmd struct {
	cli.StoreFlags
	File   string `arg:"" name:"file" help:"The workflow definition (YAML or JSON); its name is what requests name."`
	Lambda string `name:"lambda" placeholder:"FUNCTION" help:"The Lambda function (or whimbrel-poller --name) that handles this workflow's requests and events; others leave them alone. Default: any processor."`
}

// Run registers the definition.
func (c *RegisterCmd) Run(g *Globals, k *kong.Context) error {
	def, err := workflow.Load(c.File)
	if err != nil {
		return err
	}
	se, err := open(g, k, c.StoreFlags, writes)
	if err != nil {
		return err
	}
	defer se.close()
	if err := inbox.Register(se.ctx, se.st, def, c.Lambda, "whimbrel register "+c.File); err != nil {
		return err
	}
	handler := "any processor"
	if c.Lambda != "" {
		handler = c.Lambda
	}
	fmt.Fprintf(k.Stdout, "registered %s (%d activities), handled by %s\n", def.Name, len(def.Activities), handler)
	return nil
}

// RequestCmd is `whimbrel request`.
type RequestCmd struct {
	cli.StoreFlags
	Workflow  string        `arg:"" name:"workflow" help:"The registered workflow to start."`
	RequestID string        `name:"request-id" help:"The request's ID (default: WORKFLOW::UUID). An ID is inserted once; the same ID again is refused."`
	Source    string        `name:"source" default:"whimbrel request" help:"Who or what asks, for the record."`
	Wait      bool          `name:"wait" help:"Wait until the workflow settles; exit 0 only if it COMPLETED."`
	Every     time.Duration `name:"wait-interval" default:"1s" help:"How often --wait looks."`
	ParamFlags
}

// Run inserts the request and prints the workflow_exec_id it starts.
func (c *RequestCmd) Run(g *Globals, k *kong.Context) error {
	if err := state.CheckName(c.Workflow); err != nil {
		return &cli.UsageError{Msg: "workflow " + err.Error()}
	}
	if err := checkRequestID(c.RequestID); err != nil {
		return err
	}
	if c.Every <= 0 {
		return &cli.UsageError{Msg: "--wait-interval must be positive"}
	}
	if s := c.Resolved(cli.DefaultStore); strings.HasPrefix(s, "sqlite:") {
		return &cli.UsageError{Msg: "the Simple Lambda API needs DynamoDB's streams, which " + s + " has not: start the workflow with `whimbrel start FILE` (or `whimbrel run FILE`) instead"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := g.Logger("whimbrel", k.Stderr)
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	execID, err := inbox.Request(ctx, st, c.Workflow, inbox.RequestOptions{ID: c.RequestID, Source: c.Source,
		Bind: c.bind, HasParams: len(c.Param) > 0 || c.ParamsFile != ""})
	if err != nil {
		return err
	}
	fmt.Fprintln(k.Stdout, execID)
	if !c.Wait {
		return nil
	}
	return waitSettled(ctx, st, execID, c.Every, log, k)
}

// RegisteredCmd is `whimbrel registered`.
type RegisteredCmd struct {
	cli.StoreFlags
}

// Run lists the registered workflows.
func (c *RegisteredCmd) Run(g *Globals, k *kong.Context) error {
	se, err := open(g, k, c.StoreFlags, reads)
	if err != nil {
		return err
	}
	defer se.close()
	regs, err := se.st.Registrations(se.ctx)
	if _, err := state.Skipped(err); err != nil { // a malformed one is reported by the store
		return err
	}
	w := tabwriter.NewWriter(k.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "WORKFLOW\tHANDLED BY\tACTIVITIES\tREGISTERED")
	for _, r := range regs {
		handler, acts := r.Lambda, "?"
		if handler == "" {
			handler = "any processor"
		}
		if def, err := workflow.ParseStored(r.Definition); err == nil {
			acts = fmt.Sprint(len(def.Activities))
		}
		when := "-"
		if !r.Registered.IsZero() {
			when = r.Registered.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", inert.String(r.WorkflowName), inert.String(handler), acts, when)
	}
	return w.Flush()
}
