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
// process to their own owners, until the child has exited or quit. It
// polls without blocking, so that quit can end it even when the child
// survives SIGKILL; each poll holds mu, so the reap cannot race a signal
// to a reused ID. It polls when the child's pidfd says it has exited: a
// process that runs many commands at once (a launcher supervising them
// inline) then wakes each waiter for its own child's exit only, where a
// SIGCHLD would wake every waiter for every exit. Without a pidfd the
// poller can watch, it polls on every SIGCHLD (watch).
func (p *Process) waitChild(pidfd *os.File) {
	defer p.bg.Done()
	if pidfd != nil {
		defer pidfd.Close()
		if p.waitPidfd(pidfd) {
			return
		}
	}
	p.watch(p.collectChild)
}

// openPidfd is a pidfd of the child pid, which no one has reaped yet,
// that the runtime's poller watches, or nil when there is none (a kernel
// before Linux 5.10, or a file the poller refused).
func openPidfd(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	// A deadline is refused when the poller does not watch the file.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return nil
	}
	return f
}

// waitPidfd polls the child each time its pidfd becomes readable, which
// it does once the child has exited, and every reapInterval besides, until
// the child is reaped, or until quit: then it polls a last time and gives
// up on a child still not reaped. It reports false, having reaped
// nothing, if the poller cannot wait on the pidfd after all.
func (p *Process) waitPidfd(pidfd *os.File) bool {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	for {
		if err := pidfd.SetReadDeadline(time.Now().Add(reapInterval)); err != nil {
			return false
		}
		err := rc.Read(func(uintptr) bool { return p.collectChild() })
		switch {
		case err == nil:
			return true
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return false
		}
		select {
		case <-p.quit:
			p.collectChild()
			p.giveUp()
			return true
		default:
		}
	}
}

// watch calls poll at once, on every SIGCHLD and every reapInterval,
// until poll reports that it is done, or until quit: then it polls a last
// time and gives up on a child still not reaped.
func (p *Process) watch(poll func() (done bool)) {
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, unix.SIGCHLD)
	defer signal.Stop(chld)
	tick := time.NewTicker(reapInterval)
	defer tick.Stop()

	// SIGCHLD notifications coalesce, and one may have fired before Notify
	// above, so every wake-up polls, the first one too.
	for !poll() {
		select {
		case <-p.quit:
			poll()
			p.giveUp()
			return
		case <-chld:
		case <-tick.C:
		}
	}
}

// collectChild reaps the child if it has exited, and reports whether its
// end is recorded.
func (p *Process) collectChild() bool {
	p.polls.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return true
	}
	var ws unix.WaitStatus
	var pid int
	err := retryEINTR(func() error {
		var err error
		pid, err = unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
		return err
	})
	switch {
	case err != nil:
		p.exitedLocked(0, fmt.Errorf("wait for child %d: %w: %w", p.pid, ErrLostChild, err))
	case pid == 0:
		return false
	default:
		p.exitedLocked(ws, nil)
	}
	return true
}

// giveUp records, at Close, a child that is still not reaped: it survived
// SIGKILL (see Stop). It is no longer signalled, and Wait reports
// ErrStopTimeout, so that no goroutine is left waiting for it.
func (p *Process) giveUp() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.reaped {
		p.exitedLocked(0, fmt.Errorf("wait for child %d: %w", p.pid, ErrStopTimeout))
	}
}

// reap owns all waiting in reaping mode, until quit. Any waited-for child
// that is not the main child is an orphaned descendant and is simply
// reaped. Reaping continues after the main child exits, because orphans
// can outlive it.
func (p *Process) reap() {
	defer p.bg.Done()
	p.watch(func() bool {
		p.reapAll() // drains every exited child
		return false
	})
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
	case p.waitErr != nil: // lost, or given up on
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
