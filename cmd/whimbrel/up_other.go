//go:build !linux

package main

import (
	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
)

// serveUp cannot run activities off Linux; it says so.
func serveUp(*Globals, *kong.Context, *UpCmd, cli.Choice, string, bool) error {
	return errLocalNeedsLinux
}

// upInfo is what whimbrel up says of itself; off Linux none runs.
type upInfo struct {
	PID int
	Web string
}

// upRunning reports that no whimbrel up runs: off Linux none can.
func upRunning(string) (upInfo, bool) { return upInfo{}, false }
