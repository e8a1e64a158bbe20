//go:build !linux

package main

import (
	"context"
	"errors"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// errLocalNeedsLinux is why this build of whimbrel runs no activity.
var errLocalNeedsLinux = errors.New("local runs need Linux: whimbrel-run supervises each command through Linux process groups and signals. " +
	"From this machine, start workflows on DynamoDB (--store dynamodb) for a whimbrel-launcher on Linux to run them; " +
	"status, list, cancel, rerun --detach and stats work here on either store")

// runHere cannot run activities off Linux; it says so.
func runHere(context.Context, *kong.Context, here, state.Store, *definition.Workflow, func(context.Context) (string, error)) error {
	return errLocalNeedsLinux
}
