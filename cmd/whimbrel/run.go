package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/term"

	"github.com/whimbrel/whimbrel/internal/cli"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/web"
	"github.com/whimbrel/whimbrel/workflow"
)

// defaultRunStore is where `whimbrel run` keeps its state unless told
// otherwise: a file in the current folder, nothing to set up.
const defaultRunStore = "sqlite:.whimbrel/state.db"

// RunCmd is `whimbrel run`.
type RunCmd struct {
	cli.StoreFlags
	File      string `arg:"" name:"file" help:"The workflow definition (YAML or JSON)."`
	Wrapper   string `name:"wrapper" type:"path" help:"The whimbrel-run binary (default: beside this binary, else on PATH)."`
	LogDir    string `name:"log-dir" type:"path" default:".whimbrel/logs" help:"Where each activity's output goes."`
	Retention string `name:"retention" help:"Keep the execution's items this long after it settles (30d, 72h). Overrides the definition's retention."`
	Web       bool   `name:"web" help:"Serve a read-only web view of the run on loopback (--web-addr) and print its address."`
	WebAddr   string `name:"web-addr" default:"127.0.0.1:0" help:"Where --web listens (port 0: any free port)."`
	ParamFlags
}

// Run runs the workflow to its end on this machine.
func (c *RunCmd) Run(g *Globals, k *kong.Context) error {
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
	wrapper := c.Wrapper
	if wrapper == "" {
		if wrapper, err = launcher.FindWrapper(); err != nil {
			return &cli.UsageError{Msg: err.Error()}
		}
	}
	ctx := context.Background()
	log := g.Logger("whimbrel", k.Stderr)
	if g.LogLevel == "info" {
		// The progress tells what happens; the launcher's and monitor's
		// own lines would only repeat it. --log-level debug shows them.
		log.SetLevel(hclog.Warn)
	}
	st, err := c.OpenOr(ctx, log, defaultRunStore)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		return fmt.Errorf("install the store: %w", err)
	}
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(interrupt)

	logDir, err := filepath.Abs(c.LogDir)
	if err != nil {
		return err
	}
	tty, width := false, 0
	if f, ok := k.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = true
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			width = w
		}
	}
	var started func(string)
	if c.Web {
		view, err := web.StartBackground(st, c.WebAddr, log)
		if err != nil {
			return &cli.UsageError{Msg: "--web: " + err.Error()}
		}
		defer view.Stop(2 * web.PollInterval) // open pages fetch the end
		started = view.Announce(k.Stdout)
	}
	res, err := local.Run(ctx, st, def, local.Options{
		Wrapper:   wrapper,
		StoreEnv:  map[string]string{"WHIMBREL_STORE": c.Resolved(defaultRunStore), "WHIMBREL_TABLE_PREFIX": c.Prefix},
		LogDir:    logDir,
		Out:       k.Stdout,
		TTY:       tty,
		Width:     width,
		Interrupt: interrupt,
		Logger:    log,
		Started:   started,
		Params:    params,
	})
	if err != nil {
		return err
	}
	if res.Workflow == nil || res.Workflow.State != state.WorkflowCompleted {
		return &cli.ExitError{Code: cli.ExitFailure}
	}
	return nil
}
