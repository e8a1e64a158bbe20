package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/notify"
)

// NotifyFlags configure the monitor's deliverer of notifications
// (docs/notifications.md).
type NotifyFlags struct {
	NotifyConcurrency int           `name:"notify-concurrency" default:"8" help:"Notification deliveries in flight at most (0: deliver none)."`
	NotifyTimeout     time.Duration `name:"notify-timeout" default:"10s" help:"A notification's receiver that has not answered by then is cut off (the delivery is tried again)."`
	WebURL            string        `name:"web-url" env:"WHIMBREL_WEB_URL" help:"The web view's base URL (whimbrel web): each notification links to its execution's page."`
}

// deliverer is the monitor's deliverer on st, or nil when the store keeps
// no notifications or --notify-concurrency is 0.
func (f NotifyFlags) deliverer(st any, interval time.Duration, log hclog.Logger, obs notify.Observer) *notify.Deliverer {
	ns, ok := st.(notify.Store)
	if !ok || f.NotifyConcurrency == 0 {
		return nil
	}
	return notify.New(ns, notify.Config{Concurrency: f.NotifyConcurrency, Timeout: f.NotifyTimeout, WebURL: f.WebURL,
		Interval: min(interval, notify.DefaultInterval), Logger: log.Named("notify"), Observer: obs})
}

// startDeliverer runs d in its own goroutine, so that no delivery delays
// a sweep; the returned stop cancels it and waits for it.
func startDeliverer(ctx context.Context, d *notify.Deliverer) (stop func()) {
	if d == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned: stop cancels and waits for it
		defer close(done)
		_ = d.Run(ctx)
	}()
	return func() { cancel(); <-done }
}
