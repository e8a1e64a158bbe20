//go:build whimbrel_fault

package fault

import (
	"fmt"
	"os"
)

// Point exits the process with ExitCode, without any cleanup, when the
// WHIMBREL_FAULT variable names it.
func Point(name string) {
	if os.Getenv(Env) == name {
		fmt.Fprintf(os.Stderr, "fault: dying at %s\n", name)
		os.Exit(ExitCode)
	}
}
