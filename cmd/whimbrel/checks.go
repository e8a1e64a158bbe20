package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/inert"
)

// applyRetention overrides the definition's retention with a flag's value.
func applyRetention(def *definition.Workflow, flag string) error {
	if flag == "" {
		return nil
	}
	d, err := definition.ParseDuration(flag)
	if err != nil || d <= 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--retention %q: give a positive duration such as 30d or 72h", flag)}
	}
	def.Retention = definition.Duration(d)
	return nil
}

// checkRequestID refuses a request ID that would put control characters
// into the items operators read.
func checkRequestID(id string) error {
	if inert.String(id) != id {
		return &cli.UsageError{Msg: fmt.Sprintf("--request-id %s holds control characters: use printable text", strconv.Quote(id))}
	}
	return nil
}

// load reads and checks a definition file, and prints what the check
// warns of (the definition still runs) to w.
func load(file string, w io.Writer) (*definition.Workflow, error) {
	def, err := definition.Load(file)
	var bad *definition.InvalidError
	if errors.As(err, &bad) {
		return nil, &cli.UsageError{Msg: err.Error()}
	}
	if err != nil {
		return nil, err
	}
	for _, msg := range def.Warnings() {
		fmt.Fprintf(w, "warning: %s\n", inert.String(msg))
	}
	return def, nil
}

// resolveRegistered reads the registered definitions that def's child
// workflows name (workflow: {name: N}) from the store, so that they are
// stored with the execution as a file's are.
func resolveRegistered(ctx context.Context, st cli.Store, def *definition.Workflow) error {
	return def.ResolveRegistered(func(name string) (*definition.Workflow, error) {
		r, err := st.Registration(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%w (register it with whimbrel register FILE)", err)
		}
		return definition.FromJSON(r.Definition)
	})
}
