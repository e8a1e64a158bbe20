package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
)

// `whimbrel registered`: what the Simple Lambda API's processors serve.

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
		if def, err := definition.FromJSON(r.Definition); err == nil {
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
