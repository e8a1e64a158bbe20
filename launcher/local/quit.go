package local

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
)

// QuitRecordWait bounds how long a launcher that quits at once waits for
// the activities supervised inline to record their ends: with a store that
// is slow or down, each would retry its final writes for minutes. Those it
// leaves are as a killed wrapper's: RUNNING until the monitor times out
// their stopped heartbeats.
const QuitRecordWait = 8 * time.Second

// Quit kills what is left of the activities at once (Signal(SIGKILL):
// the wrappers, whose guards kill their commands at once, and the
// commands supervised inline), then waits for them to end and to record
// their ends for at most within. It reports whether all of them ended;
// those that did not go on trying to record until the process exits, and
// the shared guard process is left open, to stop any command left when
// the process exits.
func (b *Backend) Quit(within time.Duration) bool {
	b.mu.Lock()
	b.quitting = true // Launch starts nothing from now on
	b.mu.Unlock()
	b.Signal(syscall.SIGKILL)
	done := make(chan struct{})
	go func() { // owned: ends with the last activity, or with the process
		defer close(done)
		b.wg.Wait()
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-done:
		b.closeGuard()
		return true
	case <-t.C:
		return false
	}
}

// errQuitting is why a launch after Quit starts nothing.
var errQuitting = errors.New("the launcher is quitting: nothing new starts")

// isQuitting reports whether Quit has been called.
func (b *Backend) isQuitting() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.quitting
}

// quittingError is what Launch returns for j once Quit has been called.
// An activity the run would have claimed from READY itself stays READY,
// for the next launcher (launcher.ErrNotClaimed); one the launcher already
// claimed is failed by it, its launch refused.
func quittingError(j launcher.Job) error {
	if j.FromReady {
		return fmt.Errorf("%w: %w", launcher.ErrNotClaimed, errQuitting)
	}
	return errQuitting
}
