package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
)

// PoolCmd is `whimbrel pool`.
type PoolCmd struct {
	Set    PoolSetCmd    `cmd:"" help:"Define a pool, or change its size at once (fewer slots: nothing running is stopped, nothing new starts until under the limit)."`
	List   PoolListCmd   `cmd:"" help:"List the pools: name, slots, in use, waiting."`
	Show   PoolShowCmd   `cmd:"" help:"Show a pool's holders (activity, workflow, since) and its waiters, oldest first."`
	Delete PoolDeleteCmd `cmd:"" help:"Delete a pool: its activities then wait until it is set again."`
}

// PoolSetCmd is `whimbrel pool set`.
type PoolSetCmd struct {
	cli.StoreFlags
	Name        string `arg:"" name:"name" help:"The pool, as activities name it (pool: NAME)."`
	Slots       int    `name:"slots" required:"" help:"How many slots may be held at once, fleet-wide (0 holds every activity of the pool back)."`
	Description string `name:"description" help:"What the pool stands for, for people."`
}

// Run defines or resizes the pool.
func (c *PoolSetCmd) Run(g *Globals, k *kong.Context) error {
	if err := state.CheckPool(c.Name, c.Slots); err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	return withPools(g, k, c.StoreFlags, writes, func(ctx context.Context, st inspect.PoolSource) error {
		p, err := state.SetPool(ctx, st, c.Name, c.Slots, c.Description, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(k.Stdout, "pool %s: %d slots\n", p.Name, p.Slots)
		return nil
	})
}

func withPools(g *Globals, k *kong.Context, f cli.StoreFlags, a access, fn func(context.Context, inspect.PoolSource) error) error {
	return withSession(g, k, f, a, func(se *session) error {
		ps, ok := se.st.(inspect.PoolSource)
		if !ok {
			return fmt.Errorf("the store %T keeps no pools", se.st)
		}
		err := fn(se.ctx, ps)
		if errors.Is(err, state.ErrNotFound) {
			return fmt.Errorf("%w (whimbrel pool list shows the pools in %s)", err, se.where(f.Prefix))
		}
		return err
	})
}
