package state_test

import (
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// TestImportsNoClientMode: the contract, its backends and their suite sit
// below the Simple Lambda API, which extends them from above.
func TestImportsNoClientMode(t *testing.T) {
	testbin.CheckDeps(t, "./...",
		"github.com/whimbrel/whimbrel/simpleapi",
		"github.com/whimbrel/whimbrel/simpleapi/",
	)
}
