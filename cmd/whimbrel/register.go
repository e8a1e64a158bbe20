package main

import (
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
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
	def, err := load(c.File, k.Stderr)
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
