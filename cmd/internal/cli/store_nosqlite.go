//go:build whimbrel_nosqlite

package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// Stores names the stores this build can open, for --version. This one
// was built with the whimbrel_nosqlite tag, as the container image builds
// its whimbrel-run: without the SQLite driver the binary is a fifth
// smaller and holds less memory while its command runs, and in a
// container the state is in DynamoDB.
const Stores = "stores: dynamodb; no embedded store (sqlite): built with the whimbrel_nosqlite tag"

// openSQLite says that this build has no embedded store, and what to use
// instead.
func openSQLite(path, _ string, _ hclog.Logger) (Store, error) {
	return nil, &UsageError{Msg: fmt.Sprintf("store 'sqlite:%s': this %s was built without the embedded store "+
		"(the whimbrel_nosqlite build tag, as the container image's whimbrel-run is): use --store dynamodb, "+
		"or a build that has both (whimbrel-run-full in the container image, make native, or the release binaries)", path, filepath.Base(os.Args[0]))}
}
