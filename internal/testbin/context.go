package testbin

import (
	"context"
	"testing"
	"time"
)

// Timeout bounds every wait made under Context: long enough for a loaded
// machine and DynamoDB Local, short enough that a hung test fails with its
// own message before go test's global timeout kills the whole binary.
const Timeout = 3 * time.Minute

// Context is a test's context: cancelled when the test ends, and at the
// latest after Timeout. It is cancelled after the cleanups registered
// after it, so those may still use it.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}
