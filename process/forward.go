//go:build linux

package process

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// relayed reports whether the forwarder passes sig on to the child. It
// passes on everything except signals that concern the wrapper itself:
//
//   - SIGCHLD reports the wrapper's own children; waiting handles it.
//   - SIGURG is sent by the Go runtime to its own threads for preemption.
//   - SIGPIPE comes from the wrapper's own writes, such as stderr
//     passthrough to a closed pipe. It is caught so that it cannot kill the
//     wrapper, but it says nothing to the child.
//   - SIGPROF is the wrapper's own profiling timer.
//   - SIGTTIN and SIGTTOU are sent when the wrapper's process group touches
//     a terminal from the background; relaying them would suspend a child
//     that did nothing.
//
// SIGWINCH is relayed on purpose: the child has its own process group, which
// is the terminal's foreground group only when the wrapper's was, so it would
// not otherwise always learn of a resize. SIGTSTP and SIGCONT are relayed too,
// so job control suspends and resumes the child while the wrapper keeps
// running.
func relayed(sig syscall.Signal) bool {
	switch sig {
	case unix.SIGCHLD, unix.SIGURG, unix.SIGPIPE, unix.SIGPROF, unix.SIGTTIN, unix.SIGTTOU:
		return false
	}
	return true
}

// forward relays signals caught by Start until quit. It keeps running after
// the child exits so that a late SIGTERM cannot kill the wrapper before it
// has reported the child's status. With KillAfterTerm it also owns the
// kill grace that a relayed SIGTERM arms (see Config.KillAfterTerm).
func (p *Process) forward(sigs chan os.Signal) {
	defer p.bg.Done()
	defer signal.Stop(sigs)
	var grace *time.Timer
	var graceUp <-chan time.Time // nil until a SIGTERM is relayed, and once the child exited
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	exited := p.exited
	for {
		select {
		case <-p.quit:
			return
		case <-exited:
			exited, graceUp = nil, nil // nothing left to kill
		case <-graceUp:
			graceUp = nil
			p.log.Warn("command outlived the kill grace after SIGTERM; killing it", "pid", p.pid, "grace", p.grace)
			p.kill()
		case sig := <-sigs:
			s, ok := sig.(syscall.Signal)
			if !ok || !relayed(s) {
				continue
			}
			target := -p.pid
			if p.childOnly {
				target = p.pid
			}
			p.mu.Lock()
			err := p.signalTargetLocked(target, s)
			p.mu.Unlock()
			if err != nil {
				p.log.Debug("signal not relayed", "signal", s, "error", err)
				continue
			}
			p.log.Debug("relayed signal", "signal", s, "pid", p.pid)
			if !p.termKill || s != unix.SIGTERM {
				continue
			}
			if grace == nil {
				p.log.Info("relayed SIGTERM to the command; it is killed if it outlives the kill grace", "pid", p.pid, "grace", p.grace)
				grace = time.NewTimer(p.grace)
				graceUp = grace.C
				continue
			}
			p.log.Warn("second SIGTERM; killing the command", "pid", p.pid)
			p.kill()
		}
	}
}
