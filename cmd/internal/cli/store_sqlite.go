//go:build !whimbrel_nosqlite

package cli

import (
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// SQLite is an opened embedded store, with the Simple Lambda API's inbox
// kept in its tables.
type SQLite struct {
	*sqlite.Store
	*sqliteinbox.Inbox
}

// Stores names the stores this build can open, for --version: every
// build has both but one made with the whimbrel_nosqlite tag (the
// container image's whimbrel-run).
const Stores = "stores: dynamodb, sqlite"

// openSQLite opens the embedded store at path.
func openSQLite(path, prefix string, log hclog.Logger) (Store, error) {
	st, err := sqlite.Open(path, sqlite.Options{Prefix: prefix, Logger: log.Named("sqlite")})
	if err != nil {
		return nil, err
	}
	return &SQLite{st, sqliteinbox.New(st)}, nil
}
