// Package notify delivers the notifications that the participants which
// record an execution's ending write (package workflow), and fires the
// executions' deadlines. Any number of deliverers (every monitor, and
// whimbrel run for its own workflow) may run at once: each finds the due
// items through the store's due index, takes one with a conditional write
// (a lease, so that two deliverers seldom send the same item), sends it to
// a webhook or an EventBridge bus, and records the outcome conditionally.
// A delivery is retried with backoff until a receiver takes it or MaxAge
// has passed since it was written; each try carries the same delivery ID.
package notify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Store is what a deliverer needs: the notification items, and the
// executions (and their activities) the watches are of.
type Store interface {
	state.Notifications
	workflow.Reader
}

// Defaults of Config.
const (
	DefaultConcurrency = 8
	DefaultTimeout     = 10 * time.Second
	DefaultInterval    = 5 * time.Second
	// MaxAge is how long a delivery is retried after it was written;
	// then it is UNDELIVERABLE.
	MaxAge = 24 * time.Hour
	// FirstRetry and MaxRetry bound the backoff between tries: it doubles
	// from FirstRetry up to MaxRetry, with jitter.
	FirstRetry = 10 * time.Second
	MaxRetry   = time.Hour
)

// Observer is told what a deliverer did, for metrics; its methods must
// not block.
type Observer interface {
	// Written: a delivery was taken for the first time (once across the
	// fleet: by the deliverer whose conditional write won).
	Written(workflow, event string)
	// Tried: one try of a delivery ended (outcome delivered, failed or
	// undeliverable; code the receiver's HTTP status, or "error").
	Tried(workflow, event, outcome, code string, took time.Duration)
}

// Config configures a Deliverer.
type Config struct {
	Concurrency int           // deliveries in flight at most (default DefaultConcurrency)
	Timeout     time.Duration // a receiver that has not answered by then is cut off (default DefaultTimeout)
	Interval    time.Duration // between looks at the due index (default DefaultInterval)
	// WebURL, when set, is the web view's base URL: each body links to
	// the execution's page.
	WebURL string
	// Workflow, when set, limits the deliverer to one execution's items
	// (whimbrel run).
	Workflow string
	// HTTP sends webhooks (default: a client with no redirects followed
	// beyond Go's default, bounded by Timeout).
	HTTP *http.Client
	// EventBridgeEndpoint overrides the EventBridge endpoint (tests; the
	// SDK's AWS_ENDPOINT_URL_EVENTBRIDGE works too).
	EventBridgeEndpoint string
	Logger              hclog.Logger
	Observer            Observer
	// Now is the deliverer's clock (default time.Now).
	Now func() time.Time
	// FirstRetry is the wait after a first failed try; it doubles with
	// every try up to MaxRetry (default FirstRetry).
	FirstRetry time.Duration
}

// Deliverer finds due notification items and works on them.
type Deliverer struct {
	st   Store
	cfg  Config
	send *senders

	mu       sync.Mutex
	inFlight map[state.NotificationKey]bool
}

// New returns a deliverer on st.
func New(st Store, cfg Config) *Deliverer {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = FirstRetry
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	return &Deliverer{st: st, cfg: cfg, send: newSenders(cfg), inFlight: map[state.NotificationKey]bool{}}
}

// Run works on due items every interval until ctx ends, at most
// Concurrency at a time, each in a goroutine of its own that Run waits
// for before it returns. A look finds only what is due, so a slow
// receiver delays nothing but its own delivery.
func (d *Deliverer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		d.dispatch(ctx, &wg)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Once works on every item due now and waits for them (for --once).
func (d *Deliverer) Once(ctx context.Context) {
	var wg sync.WaitGroup
	d.dispatch(ctx, &wg)
	wg.Wait()
}

// dispatch starts a goroutine for each due item not in flight, while
// fewer than Concurrency are.
func (d *Deliverer) dispatch(ctx context.Context, wg *sync.WaitGroup) {
	d.mu.Lock()
	free := d.cfg.Concurrency - len(d.inFlight)
	d.mu.Unlock()
	if free <= 0 {
		return
	}
	keys, err := d.due(ctx, free+d.cfg.Concurrency)
	if err != nil {
		if ctx.Err() == nil {
			d.cfg.Logger.Warn("listing due notifications failed", "error", err)
		}
		return
	}
	for _, k := range keys {
		if d.cfg.Workflow != "" && k.WorkflowExecID != d.cfg.Workflow {
			continue
		}
		d.mu.Lock()
		if d.inFlight[k] || len(d.inFlight) >= d.cfg.Concurrency {
			d.mu.Unlock()
			continue
		}
		d.inFlight[k] = true
		d.mu.Unlock()
		wg.Add(1)
		go func() { // owned: Run and Once wait for wg
			defer wg.Done()
			defer func() { d.mu.Lock(); delete(d.inFlight, k); d.mu.Unlock() }()
			if err := d.Work(ctx, k); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("working on a notification failed", "workflow_exec_id", k.WorkflowExecID, "notification_id", k.ID, "error", err)
			}
		}()
	}
}

// due lists the keys of the due items: through the due index, or, for a
// deliverer of one execution's items, from that execution's partition
// (the index would list every other execution's too).
func (d *Deliverer) due(ctx context.Context, limit int) ([]state.NotificationKey, error) {
	if d.cfg.Workflow == "" {
		return d.st.DueNotifications(ctx, d.cfg.Now(), limit)
	}
	items, err := d.st.NotificationsOf(ctx, d.cfg.Workflow)
	if _, err = state.Skipped(err); err != nil {
		return nil, err
	}
	var out []state.NotificationKey
	for _, n := range items {
		if !n.Due.IsZero() && !n.Due.After(d.cfg.Now()) {
			out = append(out, n.NotificationKey)
		}
	}
	return out, nil
}

// Work does what one item needs now: a watch is judged (its deadline
// fired, its execution's ending notified), a delivery tried. An item
// that is not due (any more) is left alone, as is one another deliverer
// took first.
func (d *Deliverer) Work(ctx context.Context, k state.NotificationKey) error {
	n, err := d.st.GetNotification(ctx, k.WorkflowExecID, k.ID)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil // the index lags a deletion (by TTL)
	case err != nil:
		return err
	}
	now := d.cfg.Now()
	if n.Due.IsZero() || n.Due.After(now) {
		return nil // the index lags, or another deliverer moved it
	}
	switch {
	case k.ID == state.WatchID && n.State == state.NotificationWatching:
		return d.watch(ctx, n, now)
	case k.ID != state.WatchID && n.State == state.NotificationPending:
		return d.deliver(ctx, n, now)
	}
	return nil
}

// backoff is the wait after the attempts-th failed try.
func (d *Deliverer) backoff(attempts int) time.Duration {
	b := d.cfg.FirstRetry
	for i := 1; i < attempts && b < MaxRetry; i++ {
		b *= 2
	}
	b = min(b, MaxRetry)
	return b/2 + rand.N(b/2+1) // jitter, so that many deliveries to one receiver spread
}

func conflictOr(err error, what string) error {
	if err == nil || errors.Is(err, state.ErrConflict) {
		return nil // another deliverer moved it first
	}
	return fmt.Errorf("%s: %w", what, err)
}
