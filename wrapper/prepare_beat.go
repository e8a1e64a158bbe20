package wrapper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/state"
)

// prepareBeating prepares the command's data while a heartbeat pump keeps
// the lease, and returns when the lease was last known good, for the pump
// that beats while the command runs. Preparing may take longer than a
// lease: the downstream of a for_each map reads the output of every
// element, thousands of items. A preparation that fits in a heartbeat
// interval writes no beat at all.
//
// A lease lost while preparing (the activity was cancelled, or timed out
// by a monitor that heard no beat) ends the preparation: the command is
// not started, and the outcome is recorded beside the state the item
// holds, as after a command stopped for the same reason.
func (r *run) prepareBeating(ctx context.Context, claimed *state.ActivityExec) (*data, time.Time, error) {
	since := claimed.StartTime
	if !r.cfg.Heartbeat {
		dt, err := r.prepareRetrying(ctx, claimed, claimTimeout)
		return dt, since, err
	}
	var mu sync.Mutex
	pump, err := heartbeat.New(r.st, heartbeat.Config{
		Key: r.cfg.Key, Owner: r.owner, Interval: r.cfg.HeartbeatInterval,
		Timeout: r.cfg.HeartbeatTimeout, Since: since, Logger: r.log.Named("heartbeat"),
		Wake: r.wake.changed,
		Landed: func(at time.Time) {
			mu.Lock()
			since = at
			mu.Unlock()
		},
	})
	if err != nil {
		// The CLI checks the settings first; without a pump the lease
		// holds for half its timeout without a beat.
		dt, err := r.prepareRetrying(ctx, claimed, min(claimTimeout, r.cfg.HeartbeatTimeout/2))
		return dt, since, err
	}
	pctx, cancel := context.WithCancel(ctx)
	var lost error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pump.Run(pctx); err != nil {
			lost = err
			cancel()
		}
	}()
	dt, err := r.prepareRetrying(pctx, claimed, claimTimeout)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var le *heartbeat.LostError
	if errors.As(lost, &le) {
		if dt != nil {
			dt.remove()
		}
		r.mu.Lock()
		r.stopReason = le.Reason
		r.mu.Unlock()
		r.log.Warn("not starting the command: the lease was lost while its data was prepared", "reason", le.Reason)
		return nil, since, &DataError{Problems: []string{fmt.Sprintf("the lease was lost while the data was prepared: %s", le.Reason)}}
	}
	return dt, since, err
}
