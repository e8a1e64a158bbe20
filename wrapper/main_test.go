package wrapper_test

import (
	"os"
	"testing"

	"github.com/whimbrel/whimbrel/process"
)

// TestMain lets this test binary be the guard process that the wrappers
// these tests run start: process.Start re-runs the binary as one.
func TestMain(m *testing.M) {
	if code, ok := process.GuardMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
