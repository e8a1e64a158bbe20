package main

import (
	"context"
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/web"
)

// defaultRunStore is where `whimbrel run` keeps its state when no store is
// chosen and none is found: a file in the current folder, nothing to set
// up.
const defaultRunStore = "sqlite:" + cli.StateFile

// RunCmd is `whimbrel run`.
type RunCmd struct {
	cli.StoreFlags
	HereFlags
	metrics.Flag
	File      string `arg:"" name:"file" help:"The workflow definition (YAML or JSON)."`
	Retention string `name:"retention" help:"Keep the execution's items this long after it settles (30d, 72h). Overrides the definition's retention."`
	Web       bool   `name:"web" help:"Serve a read-only web view of the run on loopback (--web-addr) and print its address."`
	WebAddr   string `name:"web-addr" default:"127.0.0.1:0" help:"Where --web listens (port 0: any free port)."`
	TLSFlags
	ParamFlags
}

// Run runs the workflow to its end on this machine.
func (c *RunCmd) Run(g *Globals, k *kong.Context) error {
	def, err := load(c.File, k.Stderr)
	if err != nil {
		return err
	}
	if err := applyRetention(def, c.Retention); err != nil {
		return err
	}
	if err := checkLocal(def); err != nil {
		return err
	}
	params, err := c.bind(def)
	if err != nil {
		return err
	}
	ctx := context.Background()
	log := g.QuietLogger("whimbrel", k.Stderr)
	ms, err := c.Flag.Start(log, &c.Hooks)
	if err != nil {
		return err
	}
	defer ms.Stop()
	choice := c.Choose(defaultRunStore)
	st, err := c.OpenChoice(ctx, log, choice)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		return fmt.Errorf("install the store: %w", err)
	}
	if err := resolveRegistered(ctx, st, def); err != nil {
		return err
	}
	h := here{HereFlags: c.HereFlags, choice: choice, prefix: c.Prefix, log: log, metrics: ms}
	if c.Web {
		view, err := web.StartBackground(st, c.listen(c.WebAddr), log)
		if err != nil {
			return &cli.UsageError{Msg: "--web: " + err.Error()}
		}
		defer view.Stop(2 * web.PollInterval) // open pages fetch the end
		out := k.Stdout
		if c.JSON {
			out = k.Stderr // stdout is one JSON object per line
		}
		h.started = view.Announce(out)
	}
	h.params = params
	return h.run(ctx, k, st, def, nil)
}
