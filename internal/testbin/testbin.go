// Package testbin builds the project's binaries for tests that run them as
// real processes, and holds what such tests share: a bounded context and a
// pseudo-terminal.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Build compiles each package (a path relative to the calling test's
// package) into dir under the given name, with extra go build flags. It is
// meant for TestMain, before any test runs.
func Build(dir string, flags []string, binaries map[string]string) error {
	for name, pkg := range binaries {
		args := append(append([]string{"build"}, flags...), "-o", filepath.Join(dir, name), pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return nil
}

// Main builds the binaries into a temporary directory, runs the tests with
// it, removes it and exits. It never returns.
func Main(run func(dir string) int, flags []string, binaries map[string]string) {
	dir, err := os.MkdirTemp("", "whimbrel-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := Build(dir, flags, binaries); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := run(dir)
	os.RemoveAll(dir)
	os.Exit(code)
}
