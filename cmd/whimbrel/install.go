package main

import (
	"context"
	"fmt"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
)

// InstallCmd is `whimbrel install`.
type InstallCmd struct {
	cli.StoreFlags
	DryRun bool `name:"dry-run" help:"Only print what would be created; change nothing."`
}

// Run creates the missing tables and indexes and records their versions.
func (c *InstallCmd) Run(g *Globals, k *kong.Context) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := c.Open(ctx, g.Logger("whimbrel", k.Stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	actions, err := st.Install(ctx, c.DryRun)
	verb := ""
	if c.DryRun {
		verb = "would "
	}
	for _, a := range actions {
		fmt.Fprintf(k.Stdout, "%s%s: %s\n", verb, a.Object, a.Action)
	}
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if len(actions) == 0 {
		fmt.Fprintf(k.Stdout, "nothing to do: every table and index under prefix %q is installed\n", c.Prefix)
	}
	return nil
}
