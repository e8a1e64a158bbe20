package local

import (
	"context"
	"time"

	"github.com/whimbrel/whimbrel/notify"
)

// A run delivers its own workflow's notifications (docs/notifications.md)
// beside its monitor, so that `whimbrel run` tells the receivers without
// a whimbrel-monitor; what it has not delivered when it ends (a receiver
// that failed) stays due for any monitor.

// finalDelivery bounds the last look at the run's notifications after the
// workflow settled: the ending's are written by then.
const finalDelivery = 30 * time.Second

// startDelivering runs a deliverer of the run's notifications until the
// crew stops; nil when the store keeps none.
func (c *crew) startDelivering(ctx context.Context, st Store, id string, opts Options) {
	ns, ok := st.(notify.Store)
	if !ok {
		return
	}
	c.deliverer = notify.New(ns, notify.Config{Workflow: id, Interval: monitorInterval, WebURL: opts.WebURL,
		Logger: opts.Logger.Named("notify"), Observer: opts.NotifyObserver})
	dctx, stop := context.WithCancel(ctx)
	c.stopDelivering = stop
	c.delivering.Add(1)
	go func() { // owned: stopDeliverer cancels and waits for it
		defer c.delivering.Done()
		_ = c.deliverer.Run(dctx)
	}()
}

// stopDeliverer stops the deliverer, then delivers once more what the
// ending wrote, within finalDelivery.
func (c *crew) stopDeliverer(ctx context.Context) {
	if c.deliverer == nil {
		return
	}
	c.stopDelivering()
	c.delivering.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalDelivery)
	defer cancel()
	c.deliverer.Once(ctx)
}
