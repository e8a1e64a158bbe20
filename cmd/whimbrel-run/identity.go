package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
)

// Checks of the command line that name what is wrong.

// identity reads and checks the activity's identity.
func (c *CLI) identity() (state.ActivityKey, error) {
	check := func(id, idFlag, idEnv, name, nameEnv, kind string) error {
		if id == "" {
			return &cli.UsageError{Msg: fmt.Sprintf("no %s execution ID: set %s or --%s", kind, idEnv, idFlag)}
		}
		got, _, err := state.SplitID(id)
		if err != nil {
			return &cli.UsageError{Msg: fmt.Sprintf("%s (from %s or --%s) is malformed: %v", idEnv, idEnv, idFlag, err)}
		}
		if name != "" && name != got {
			return &cli.UsageError{Msg: fmt.Sprintf("%s %q does not match the %s name %q in %s", nameEnv, name, kind, got, idEnv)}
		}
		return nil
	}
	if err := check(c.ActivityExecID, "activity-exec-id", "WHIMBREL_ACTIVITY_EXEC_ID", c.ActivityName, "WHIMBREL_ACTIVITY_NAME", "activity"); err != nil {
		return state.ActivityKey{}, err
	}
	if err := check(c.WorkflowExecID, "workflow-exec-id", "WHIMBREL_WORKFLOW_EXEC_ID", c.WorkflowName, "WHIMBREL_WORKFLOW_NAME", "workflow"); err != nil {
		return state.ActivityKey{}, err
	}
	return state.ActivityKey{ActivityExecID: c.ActivityExecID, WorkflowExecID: c.WorkflowExecID}, nil
}

// parseSignal reads --parent-death-signal: a name (with or without SIG)
// or a number; 0 for none.
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return 0, nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 64 {
		return 0, &cli.UsageError{Msg: fmt.Sprintf("--parent-death-signal %q is not a signal: give a name such as SIGTERM, or a number", s)}
	}
	return syscall.Signal(n), nil
}

// guardPipe is the guard pipe of --guard-fd, or nil without one. One that
// cannot be used is only warned about: the wrapper then starts a guard
// process of its own, as without the flag.
func guardPipe(fd int, log hclog.Logger) *os.File {
	if fd == 0 {
		return nil
	}
	f, err := process.GuardPipeFD(fd)
	if err != nil {
		log.Warn("--guard-fd not used; a guard process will be started instead", "error", err)
		return nil
	}
	return f
}
