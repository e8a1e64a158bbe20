//go:build linux && !whimbrel_nosqlite

package main

import (
	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/local/up"
)

// The embedded store keeps the Simple Lambda API's requests that whimbrel
// up hands to its processor.
var _ up.Requests = (*cli.SQLite)(nil)
