package main

import (
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/state"
)

// `whimbrel request`: the Simple Lambda API's way to start a workflow.

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
	if s := c.Resolved(cli.DefaultStore); strings.HasPrefix(s, "sqlite:") {
		fmt.Fprintln(k.Stderr, requestHint(strings.TrimPrefix(s, "sqlite:")))
	}
	if !c.Wait {
		return nil
	}
	return waitSettled(ctx, st, execID, c.Every, log, k)
}

// requestHint says in one line what starts a request on the embedded
// store, which has no streams: the whimbrel up serving it, or the next one.
func requestHint(path string) string {
	if info, ok := upRunning(path); ok {
		return fmt.Sprintf("request written: whimbrel up (pid %d) starts it within a second", info.PID)
	}
	return "request written: nothing starts it until whimbrel up serves " + path + " (run `whimbrel up`: it starts the requests written meanwhile)"
}
