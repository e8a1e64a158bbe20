// Package heartbeat keeps a claimed activity's lease alive: a Pump writes
// a heartbeat every interval, fenced by the claim's owner token, and
// reports when the lease is lost — the activity was cancelled, timed out,
// taken by another owner, or no heartbeat has landed for a whole timeout.
// The wrapper then stops its command.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/state"
)

// Limits of a lease. Its defaults are the contract's
// (state.DefaultHeartbeatInterval and state.DefaultHeartbeatTimeout).
const (
	// MinTimeoutFactor is how many intervals a timeout must span at least,
	// so that one slow beat never loses the lease.
	MinTimeoutFactor = 2
	// minAttempt is the least time one store call is given.
	minAttempt = 100 * time.Millisecond
)

// Store lists what the pump needs of a state.Store. A beat that carries
// progress is an UpdateActivity with Beat and Progress: the same
// condition, one write.
type Store interface {
	Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error
	GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error)
	UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error)
}

// Config configures a Pump.
type Config struct {
	Key      state.ActivityKey
	Owner    string        // the claim's owner token
	Interval time.Duration // between beats (default state.DefaultHeartbeatInterval)
	Timeout  time.Duration // without a landed beat, the lease is lost (default state.DefaultHeartbeatTimeout)
	// Since is when the lease was last known good: the claim (default now).
	Since time.Time
	// Progress, when set, is asked before each beat for the command's
	// latest progress (at most state.MaxProgress bytes; "" for none). A
	// progress that differs from the last one delivered rides on the beat.
	Progress func() string
	// Wake, when it delivers, makes the pump beat at once rather than at
	// the next interval: whoever changed the activity (a cancel, a time
	// out) on a store that can say so is then heard within a beat's time.
	Wake <-chan struct{}
	// Landed, when set, is told the time of each beat that landed, from
	// Run's goroutine: a pump that hands the lease on to another (the
	// wrapper beats while it prepares its command, then while the command
	// runs) tells the next one when the lease was last known good.
	Landed func(at time.Time)
	Logger hclog.Logger
}

// Pump writes heartbeats until its context ends or the lease is lost.
type Pump struct {
	st  Store
	cfg Config
	log hclog.Logger
	now func() time.Time

	sent string // the last progress delivered; only Run's goroutine uses it
}

// Check returns an error unless interval and timeout make a safe lease:
// both positive (zero takes the default), the timeout at least
// MinTimeoutFactor intervals.
func Check(interval, timeout time.Duration) error {
	if interval == 0 {
		interval = state.DefaultHeartbeatInterval
	}
	if timeout == 0 {
		timeout = state.DefaultHeartbeatTimeout
	}
	if interval < 0 || timeout < 0 {
		return fmt.Errorf("heartbeat interval %s and timeout %s must be positive", interval, timeout)
	}
	if timeout < MinTimeoutFactor*interval {
		return fmt.Errorf("heartbeat timeout %s is under %d× the interval %s: one late beat would lose the lease; raise the timeout or lower the interval",
			timeout, MinTimeoutFactor, interval)
	}
	return nil
}

// New returns a Pump, refusing a timeout shorter than MinTimeoutFactor
// intervals.
func New(st Store, cfg Config) (*Pump, error) {
	if cfg.Interval == 0 {
		cfg.Interval = state.DefaultHeartbeatInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = state.DefaultHeartbeatTimeout
	}
	if err := Check(cfg.Interval, cfg.Timeout); err != nil {
		return nil, err
	}
	if cfg.Owner == "" {
		return nil, errors.New("heartbeat: no owner token")
	}
	if cfg.Since.IsZero() {
		cfg.Since = clock.Now()
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Pump{st: st, cfg: cfg, log: log.With("activity_exec_id", cfg.Key.ActivityExecID), now: clock.Now}, nil
}

// LostError says why the lease is lost.
type LostError struct {
	// State is what the activity holds, when it is known: CANCELLED_RUNNING,
	// TIMED_OUT, or another state someone else moved it to.
	State state.ActivityState
	// Expired is true when no heartbeat landed for a whole timeout (the
	// store could not be reached); State is then unknown.
	Expired bool
	Reason  string
}

func (e *LostError) Error() string { return "lease lost: " + e.Reason }

// Run beats every interval until ctx ends (it then returns nil) or the lease
// is lost (it returns a *LostError). A beat that fails for a passing reason
// is retried with backoff; one whose outcome is unknown is checked by
// reading the item before anything is concluded.
func (p *Pump) Run(ctx context.Context) error {
	last := p.cfg.Since
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-p.cfg.Wake:
			// The next regular beat counts from this one.
			t.Reset(p.cfg.Interval)
		}
		at, err := p.beat(ctx, last)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		last = at
		if p.cfg.Landed != nil {
			p.cfg.Landed(at)
		}
	}
}

// beat lands one heartbeat, retrying until the lease would expire.
func (p *Pump) beat(ctx context.Context, last time.Time) (time.Time, error) {
	var landed time.Time
	var lost *LostError
	deadline := last.Add(p.cfg.Timeout)
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(min(p.cfg.Interval/10, time.Second)),
		backoff.WithMaxInterval(p.cfg.Interval),
		backoff.WithMaxElapsedTime(0), // the lease deadline bounds it instead
	)
	op := func() error {
		// Each attempt ends by the lease's deadline: a write that hangs must
		// not outlive the lease, and one that is slow but lands in time
		// keeps it.
		attempt := func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, max(deadline.Sub(p.now()), minAttempt))
		}
		at := p.now()
		actx, cancel := attempt()
		var progress string
		if p.cfg.Progress != nil {
			if pr := p.cfg.Progress(); pr != p.sent && len(pr) <= state.MaxProgress {
				progress = pr
			}
		}
		var err error
		if progress != "" {
			_, err = p.st.UpdateActivity(actx, p.cfg.Key, state.ActivityChange{
				From: []state.ActivityState{state.Running}, Owner: p.cfg.Owner, At: at, Beat: true, Progress: progress,
			})
		} else {
			err = p.st.Heartbeat(actx, p.cfg.Key, p.cfg.Owner, at)
		}
		cancel()
		if err == nil {
			landed = at
			if progress != "" {
				p.sent = progress
			}
			return nil
		}
		if l := p.lostBy(err); l != nil {
			lost = l
			return backoff.Permanent(l)
		}
		expired := func() error {
			lost = &LostError{Expired: true, Reason: fmt.Sprintf("no heartbeat landed for %s: %v", p.now().Sub(last).Round(time.Millisecond), err)}
			return backoff.Permanent(lost)
		}
		if p.now().After(deadline) {
			return expired()
		}
		// The outcome is unknown (a timeout, a dropped connection): the
		// write may have landed. Read before concluding anything.
		rctx, cancel := attempt()
		a, rerr := p.st.GetActivity(rctx, p.cfg.Key)
		cancel()
		if rerr == nil {
			if a.State != state.Running || a.Owner != p.cfg.Owner {
				lost = p.lostTo(a.State, a.Owner)
				return backoff.Permanent(lost)
			}
			if !a.HeartbeatTime.Before(state.Truncate(at)) {
				landed = at
				return nil
			}
		}
		if p.now().After(deadline) {
			return expired()
		}
		p.log.Warn("heartbeat failed; retrying", "error", err)
		return err
	}
	err := backoff.Retry(op, backoff.WithContext(b, ctx))
	if lost != nil {
		return time.Time{}, lost
	}
	if err != nil {
		return time.Time{}, err // the context ended
	}
	return landed, nil
}

// lostBy interprets a refused heartbeat.
func (p *Pump) lostBy(err error) *LostError {
	var ce *state.ConflictError
	switch {
	case errors.As(err, &ce):
		return p.lostTo(state.ActivityState(ce.State), ce.Owner)
	case errors.Is(err, state.ErrNotFound):
		return &LostError{Reason: "the activity item is gone"}
	case errors.Is(err, state.ErrInvalidItem):
		return &LostError{Reason: err.Error()}
	}
	return nil
}

func (p *Pump) lostTo(s state.ActivityState, owner string) *LostError {
	switch {
	case s == state.CancelledRunning:
		return &LostError{State: s, Reason: "the activity was cancelled"}
	case s == state.TimedOut:
		return &LostError{State: s, Reason: "the monitor timed the activity out"}
	case owner != p.cfg.Owner:
		return &LostError{State: s, Reason: fmt.Sprintf("the activity is %s, held by %s", s, owner)}
	}
	return &LostError{State: s, Reason: fmt.Sprintf("the activity is %s", s)}
}
