//go:build linux

package process

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSignal is the highest signal number on Linux.
const maxSignal = 64

// inheritedIgnored holds, as a bit per signal (bit N-1 for signal N), the
// signals that whoever started this process left ignored and that the Go
// runtime has not taken over. It is read once, when the package is
// initialised, before anything in the process calls signal.Notify.
//
// The Go runtime installs its own handler for most signals before any
// package is initialised, and a handled signal reverts to its default action
// in a child. It keeps an inherited SIG_IGN only for SIGHUP and SIGINT, and
// it leaves SIGTSTP, SIGTTIN, SIGTTOU and SIGCONT alone until they are
// notified; those are the inherited dispositions this package can see and
// pass on. Any other inherited SIG_IGN is lost to a Go program.
var inheritedIgnored = readIgnored()

func readIgnored() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0
			}
			return mask
		}
	}
	return 0
}

// Ignored reports whether sig was ignored when the process started, as far
// as a Go program can tell (see Config.ForwardSignals). A caller that
// catches signals of its own must leave these alone, so that the command
// inherits them ignored: once a signal is caught, the command gets its
// default action.
func Ignored(sig syscall.Signal) bool {
	return sig > 0 && sig <= maxSignal && inheritedIgnored&(1<<(uint(sig)-1)) != 0
}

// catchable lists every signal that can be caught and was not ignored at
// start: what the forwarder listens to.
func catchable() []os.Signal {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= maxSignal; s++ {
		if s == unix.SIGKILL || s == unix.SIGSTOP || Ignored(s) {
			continue
		}
		sigs = append(sigs, s)
	}
	return sigs
}
