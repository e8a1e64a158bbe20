//go:build !whimbrel_nosqlite

package cli

import (
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/simpleapi"
)

// The embedded store, opened, is the same whole set as DynamoDB's (see
// compose_test.go).
var (
	_ Store           = (*SQLite)(nil)
	_ schedule.Store  = (*SQLite)(nil)
	_ simpleapi.Store = (*SQLite)(nil)
)
