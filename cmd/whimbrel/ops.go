package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// session is an operator command's store, opened by open.
type session struct {
	ctx    context.Context
	st     cli.Store
	choice cli.Choice
	log    hclog.Logger
	close  func()
}

// Access says what a command does to the store.
type access int

const (
	reads  access = iota // only reads: an embedded store must exist
	writes               // writes: an embedded store gets its tables, as whimbrel run does
)

// open is what every operator command does first: choose the store by the
// one rule (cli.StoreFlags.Choose), open it, and on the embedded store
// make sure its tables exist (a command that only reads refuses a file
// that is not there rather than create an empty one).
func open(g *Globals, k *kong.Context, f cli.StoreFlags, a access) (*session, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	log := g.Logger("whimbrel", k.Stderr)
	choice := f.Choose(cli.DefaultStore)
	if path, ok := strings.CutPrefix(choice.Store, "sqlite:"); ok && a == reads && path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			stop()
			return nil, &state.ConfigError{Msg: fmt.Sprintf("the embedded store %s does not exist: check --store/WHIMBREL_STORE, or run a workflow first (whimbrel run FILE creates it)", path), Err: err}
		}
	}
	st, err := f.OpenChoice(ctx, log, choice)
	if err != nil {
		stop()
		return nil, err
	}
	if choice.Embedded() {
		// Creating what is missing is cheap and idempotent on SQLite; it
		// spares a "no such table" on a file an older version made.
		if _, err := st.Install(ctx, false); err != nil {
			st.Close()
			stop()
			return nil, fmt.Errorf("install the embedded store %s: %w", strings.TrimPrefix(choice.Store, "sqlite:"), err)
		}
	}
	return &session{ctx: ctx, st: st, choice: choice, log: log, close: func() { st.Close(); stop() }}, nil
}

// where names the store and prefix, for errors that found nothing.
func (s *session) where(prefix string) string {
	return fmt.Sprintf("store %s, table prefix %q", s.choice.Store, prefix)
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
	se, err := open(g, k, c.StoreFlags, reads)
	if err != nil {
		return err
	}
	defer se.close()
	s, err := inspect.Load(se.ctx, se.st, c.ID, time.Now())
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
	se, err := open(g, k, c.StoreFlags, reads)
	if err != nil {
		return err
	}
	defer se.close()
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
	HereFlags
	ID          string `arg:"" name:"workflow-exec-id" help:"The execution whose definition to run again."`
	FromFailure bool   `name:"from-failure" help:"Redrive: record what completed before as COMPLETED and run only the rest."`
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
	rerun := func(ctx context.Context) (string, error) {
		return workflow.Rerun(ctx, se.st, c.ID, c.FromFailure, workflow.StartOptions{RequestID: c.RequestID})
	}
	if se.choice.Embedded() && !c.Detach {
		wf, err := se.st.GetWorkflow(se.ctx, c.ID)
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("no workflow execution %s in %s: check the ID (whimbrel list shows the recent ones)", c.ID, se.where(c.Prefix))
		}
		if err != nil {
			return fmt.Errorf("rerun %s: %w", c.ID, err)
		}
		def, err := workflow.ParseStored(wf.Definition)
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
	se, err := open(g, k, c.StoreFlags, reads)
	if err != nil {
		return err
	}
	defer se.close()
	q := state.WorkflowQuery{Name: c.Workflow}
	if since > 0 {
		q.Since = time.Now().Add(-since)
	}
	wfs, err := se.st.Workflows(se.ctx, q)
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
