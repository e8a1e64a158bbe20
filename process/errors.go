//go:build linux

package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"

	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/state"
)

// Exit codes the wrapper uses when the command's own status is not
// available: the contract's (see state), in the convention of env(1),
// nohup(1) and docker run.
const (
	// ExitWrapperError means the wrapper itself failed.
	ExitWrapperError = state.ExitWrapperError
	// ExitCannotExecute means the command exists but could not be executed.
	ExitCannotExecute = state.ExitCannotExecute
	// ExitNotFound means the command could not be found.
	ExitNotFound = state.ExitNotFound
)

var (
	// ErrNoCommand is returned by Start when Config.Args is empty.
	ErrNoCommand = errors.New("no command given")
	// ErrExited is returned by Signal once the child has been reaped, because
	// its process group ID may by then belong to an unrelated process.
	ErrExited = errors.New("child has exited")
	// ErrStopTimeout is returned by Stop when the child is still not reaped
	// a few seconds after SIGKILL, which happens only when it is stuck in
	// uninterruptible sleep in the kernel; Wait reports it after Close has
	// given up on such a child.
	ErrStopTimeout = errors.New("child did not exit after SIGKILL")
	// ErrLostChild is returned by Wait when the child's status was collected
	// by someone else, for example by another reaper in the same process.
	ErrLostChild = errors.New("child exit status lost")
)

// StartError reports that the command could not be started. Its ExitCode
// tells "not found" from "cannot execute" the way a shell does.
type StartError struct {
	// Path is the command as given or as resolved through PATH.
	Path string
	// Err is the underlying error from PATH lookup or exec.
	Err error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("start %s: %v", e.Path, e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// startError wraps err, dropping the *exec.Error or *fs.PathError layer
// whose text would only repeat the path.
func startError(path string, err error) *StartError {
	var ee *exec.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &ee):
		err = ee.Err
	case errors.As(err, &pe):
		err = pe.Err
	}
	return &StartError{Path: path, Err: err}
}

// ExitCode returns ExitNotFound, ExitCannotExecute or ExitWrapperError.
func (e *StartError) ExitCode() int {
	switch {
	case errors.Is(e.Err, exec.ErrNotFound), errors.Is(e.Err, fs.ErrNotExist):
		return ExitNotFound
	case errors.Is(e.Err, fs.ErrPermission), errors.Is(e.Err, unix.ENOEXEC),
		errors.Is(e.Err, unix.EISDIR), errors.Is(e.Err, unix.ENOTDIR):
		return ExitCannotExecute
	default:
		return ExitWrapperError
	}
}

// ExitCode maps an error from this package to the status the wrapper should
// exit with: 0 for nil, the StartError's code, or ExitWrapperError otherwise.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var se *StartError
	if errors.As(err, &se) {
		return se.ExitCode()
	}
	return ExitWrapperError
}
