//go:build linux

package process

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"time"

	"golang.org/x/sys/unix"
)

// waitChild waits for the child alone, leaving any other children of the
// process to their own owners. It first waits without reaping, so that the
// reap itself happens under mu and cannot race a signal to a reused ID.
func (p *Process) waitChild() {
	var info unix.Siginfo
	err := retryEINTR(func() error {
		return unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	})

	p.mu.Lock()
	defer p.mu.Unlock()
	var ws unix.WaitStatus
	if err == nil {
		// The child is known to have exited, so this does not block.
		err = retryEINTR(func() error {
			_, err := unix.Wait4(p.pid, &ws, 0, nil)
			return err
		})
	}
	if err != nil {
		err = fmt.Errorf("wait for child %d: %w: %w", p.pid, ErrLostChild, err)
	}
	p.exitedLocked(ws, err)
}

// reap owns all waiting in reaping mode, until quit. Any waited-for child
// that is not the main child is an orphaned descendant and is simply
// reaped. Reaping continues after the main child exits, because orphans
// can outlive it.
func (p *Process) reap() {
	defer p.bg.Done()
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	defer signal.Stop(chld)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()

	// SIGCHLD notifications coalesce, and one may have fired before Notify
	// above, so every wake-up drains all exited children.
	for {
		p.reapAll()
		select {
		case <-p.quit:
			p.reapAll()
			return
		case <-chld:
		case <-tick.C:
		}
	}
}

func (p *Process) reapAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			// No children at all, yet the main child was not reaped here:
			// someone else in the process collected it.
			if !p.reaped {
				p.exitedLocked(0, fmt.Errorf("wait for child %d: %w: %w", p.pid, ErrLostChild, err))
			}
			return
		case err != nil:
			p.log.Error("reaping failed", "error", err)
			return
		case pid == 0:
			return
		case pid == p.pid && !p.reaped:
			p.exitedLocked(ws, nil)
		default:
			p.log.Debug("reaped orphan", "pid", pid, "status", describe(ws))
		}
	}
}

// exitedLocked records the child's end. mu must be held.
func (p *Process) exitedLocked(ws unix.WaitStatus, err error) {
	p.reaped, p.status, p.waitErr = true, ws, err
	if err != nil {
		p.log.Error("lost child exit status", "error", err)
	} else {
		p.log.Debug("child exited", "pid", p.pid, "status", describe(ws))
	}
	// Descendants may hold stderr open long after the child is gone, so
	// the drain is bounded from this moment: it goes on while data keeps
	// coming (see pump), but a pipe that stays quiet for drainIdle ends it.
	if p.tty != nil {
		takeTerminalBack(p.tty)
	}
	p.exitTime = time.Now()
	if p.stderr != nil {
		_ = p.stderr.SetReadDeadline(p.drainDeadline())
	}
	close(p.exited)
}

// finish publishes the Result once the child has exited and stderr has been
// drained.
func (p *Process) finish() {
	p.mu.Lock()
	res := Result{
		Pid:        p.pid,
		Stopped:    p.stopped,
		StopReason: p.stopReason,
		StderrTail: p.tail.bytes(),
	}
	switch {
	case p.waitErr != nil:
		res.Code = ExitWrapperError
	case p.status.Signaled():
		res.Code, res.Signal = -1, p.status.Signal()
	default:
		res.Code = p.status.ExitStatus()
	}
	p.result = res
	p.mu.Unlock()
	close(p.done)
}

// drainDeadline is the next read deadline once the child has exited: an
// idle pause, but never past DrainTimeout after the exit.
func (p *Process) drainDeadline() time.Time {
	d := time.Now().Add(drainIdle)
	if last := p.exitTime.Add(p.drain); d.After(last) {
		d = last
	}
	return d
}

func describe(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "signal " + ws.Signal().String()
	}
	return fmt.Sprintf("exit %d", ws.ExitStatus())
}

func retryEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
