//go:build whimbrel_fault

package fault

import (
	"fmt"
	"os"
	"time"
)

// Point exits the process with ExitCode, without any cleanup, when the
// WHIMBREL_FAULT variable names it, and stops the calling goroutine for
// good when it names it followed by Hang.
func Point(name string) {
	switch os.Getenv(Env) {
	case name:
		fmt.Fprintf(os.Stderr, "fault: dying at %s\n", name)
		os.Exit(ExitCode)
	case name + Hang:
		fmt.Fprintf(os.Stderr, "fault: hanging at %s\n", name)
		for {
			time.Sleep(time.Hour)
		}
	}
}
