package wrapper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/state"
)

// supervise waits for the command, stopping it when the lease is lost, the
// activity is cancelled, --timeout passes, or the wrapper is told to stop.
// Every goroutine it starts ends before it returns.
func (r *run) supervise(ctx context.Context, p *process.Process, since time.Time) process.Result {
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		if err := p.Close(); err != nil {
			r.log.Error("closing the command", "error", err)
		}
	}()

	var mem *waitMem // the collector of a supervisor's process is its own
	if !r.cfg.Inline {
		mem = &waitMem{}
	}
	if r.cfg.Heartbeat {
		wake := r.wake
		pump, err := heartbeat.New(r.st, heartbeat.Config{
			Key: r.cfg.Key, Owner: r.owner, Interval: r.cfg.HeartbeatInterval,
			Timeout: r.cfg.HeartbeatTimeout, Since: since, Logger: r.log.Named("heartbeat"),
			Progress: r.progress, Wake: wake.changed, Landed: mem.landed,
		})
		if err != nil { // the CLI checks the settings first; this is a defect
			r.stop(p, "heartbeat settings refused: "+err.Error())
		} else {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					err := pump.Run(sctx)
					var lost *heartbeat.LostError
					if !errors.As(err, &lost) {
						return
					}
					switch {
					case lost.State == state.CancelledRunning || !r.cfg.KeepRunningOnLeaseLoss:
						r.log.Warn("lease lost; stopping the command", "reason", lost.Reason)
						r.stop(p, lost.Reason)
						return
					case lost.Expired:
						// The store was unreachable: keep beating, so that a
						// cancellation is still noticed once it is back.
						r.log.Warn("lease lost; letting the command run as asked, and beating on", "reason", lost.Reason)
						pump, _ = heartbeat.New(r.st, heartbeat.Config{
							Key: r.cfg.Key, Owner: r.owner, Interval: r.cfg.HeartbeatInterval,
							Timeout: r.cfg.HeartbeatTimeout, Since: clock.Now(), Logger: r.log.Named("heartbeat"),
							Progress: r.progress, Wake: wake.changed, Landed: mem.landed,
						})
					default:
						r.log.Warn("lease lost; letting the command finish as asked", "reason", lost.Reason)
						return
					}
				}
			}()
		}
	}

	if mem != nil {
		trimWhileWaiting(sctx, &wg, mem)
	}

	if r.cfg.Timeout > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTimer(r.cfg.Timeout)
			defer t.Stop()
			select {
			case <-sctx.Done():
			case <-t.C:
				r.mu.Lock()
				r.timedOut = true
				r.mu.Unlock()
				r.log.Warn("stopping the command: it ran longer than --timeout", "timeout", r.cfg.Timeout)
				r.stop(p, fmt.Sprintf("ran longer than --timeout %s", r.cfg.Timeout))
			}
		}()
	}

	// The runner relays every signal to the command. SIGTERM (docker
	// stop, ECS's StopTask, whimbrel run's Ctrl-C) also arms the kill
	// grace there (process.Config.KillAfterTerm), so that the outcome is
	// recorded before the engine kills the wrapper (the launcher gives
	// containers a stop timeout longer than the grace). SIGINT and the
	// others are only relayed: a command may handle them and carry on, as
	// under tini.
	res, err := p.Wait()
	if err != nil {
		r.log.Error("lost the command's exit status", "error", err)
	}
	return res
}

// stop asks the runner to stop the command, recording the first reason.
// It does not wait: the command's exit ends supervise.
func (r *run) stop(p *process.Process, reason string) {
	r.mu.Lock()
	if r.stopReason == "" {
		r.stopReason = reason
	}
	r.mu.Unlock()
	p.Terminate(reason)
}
