//go:build linux

package process

import "syscall"

// Result describes how the child ended. It is complete only once Wait has
// returned, by which time the stderr tail has been drained.
type Result struct {
	// Pid is the child's process ID, which is also its process group ID.
	Pid int
	// Code is the exit code, -1 when the child was killed by a signal, or
	// ExitWrapperError when Wait reports ErrLostChild or ErrStopTimeout.
	Code int
	// Signal is the signal that killed the child, or 0 if it exited.
	Signal syscall.Signal
	// Stopped reports that Stop was called while the child was still
	// running, so the runner (not the command) decided it should end.
	Stopped bool
	// StopReason is the reason given to the first Stop call.
	StopReason string
	// StderrTail holds the last bytes the child wrote to stderr.
	StderrTail []byte
}

// ExitStatus returns the status the wrapper should exit with: the exit code,
// or 128+N when the child was killed by signal N, as a shell reports it.
func (r Result) ExitStatus() int {
	if r.Signal != 0 {
		return 128 + int(r.Signal)
	}
	return r.Code
}
