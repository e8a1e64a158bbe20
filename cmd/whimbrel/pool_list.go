package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// PoolListCmd is `whimbrel pool list`.
type PoolListCmd struct {
	cli.StoreFlags
	JSON bool `name:"json" help:"Print JSON for scripts."`
}

// Run lists the pools.
func (c *PoolListCmd) Run(g *Globals, k *kong.Context) error {
	return withPools(g, k, c.StoreFlags, reads, func(ctx context.Context, st inspect.PoolSource) error {
		pools, err := inspect.Pools(ctx, st)
		if err != nil {
			return err
		}
		if c.JSON {
			return writeJSON(k.Stdout, pools)
		}
		return inspect.WritePools(k.Stdout, pools)
	})
}

// PoolShowCmd is `whimbrel pool show`.
type PoolShowCmd struct {
	cli.StoreFlags
	Name string `arg:"" name:"name" help:"The pool."`
	JSON bool   `name:"json" help:"Print JSON for scripts."`
}

// Run shows the pool.
func (c *PoolShowCmd) Run(g *Globals, k *kong.Context) error {
	return withPools(g, k, c.StoreFlags, reads, func(ctx context.Context, st inspect.PoolSource) error {
		p, err := inspect.Pool(ctx, st, c.Name)
		if err != nil {
			return err
		}
		if c.JSON {
			return writeJSON(k.Stdout, p)
		}
		return inspect.WritePool(k.Stdout, p, time.Now())
	})
}

// PoolDeleteCmd is `whimbrel pool delete`.
type PoolDeleteCmd struct {
	cli.StoreFlags
	Name string `arg:"" name:"name" help:"The pool."`
}

// Run deletes the pool.
func (c *PoolDeleteCmd) Run(g *Globals, k *kong.Context) error {
	return withPools(g, k, c.StoreFlags, writes, func(ctx context.Context, st inspect.PoolSource) error {
		// Its parked waiters go back to the READY listing, where the
		// views say why they wait, before and after (a launcher may park
		// one meanwhile).
		if _, err := state.UnparkAll(ctx, st, c.Name); err != nil {
			return err
		}
		if err := st.DeletePool(ctx, c.Name); err != nil {
			return err
		}
		if _, err := state.UnparkAll(ctx, st, c.Name); err != nil {
			return err
		}
		fmt.Fprintf(k.Stdout, "pool %s deleted\n", c.Name)
		return nil
	})
}
