// Command whimbrel-monitor times out activities whose heartbeats stopped and
// cleans up after crashes. See package monitor.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// CLI is the whole grammar of whimbrel-monitor.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	metrics.Flag
	NotifyFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Once          bool          `name:"once" help:"Sweep once and exit."`
	Interval      time.Duration `name:"interval" default:"${default_interval}" help:"Time between sweeps."`
	Skew          time.Duration `name:"skew" default:"${default_skew}" help:"Allowance for clocks that disagree between wrappers and monitors."`
	QueuedTimeout time.Duration `name:"queued-timeout" default:"${default_queued_timeout}" help:"For activities whose definition sets none: longest time between launch and start."`
	AdoptPages    int           `name:"adopt-pages" default:"${default_adopt_pages}" help:"DynamoDB: pages (1,000 items) of workflow_exec and activity_exec each sweep scans for items other clients wrote without the shard attributes (0: none)."`
}

func main() {
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-monitor", Description: description, Vars: kong.Vars{"default_interval": cli.FlagDuration(monitor.DefaultInterval), "default_skew": cli.FlagDuration(monitor.DefaultSkew), "default_queued_timeout": cli.FlagDuration(definition.DefaultQueuedTimeout), "default_adopt_pages": fmt.Sprint(monitor.DefaultAdoptPages)}}, &c)
}

// Run sweeps once or until stopped.
func (c *CLI) Run(k *kong.Context) error {
	if c.Interval <= 0 || c.Skew < 0 || c.QueuedTimeout <= 0 || c.AdoptPages < 0 || c.NotifyConcurrency < 0 || c.NotifyTimeout <= 0 {
		return &cli.UsageError{Msg: "--interval, --queued-timeout and --notify-timeout must be positive, --skew, --adopt-pages and --notify-concurrency not negative"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := c.Logger("whimbrel-monitor", k.Stderr)
	ms, err := c.Flag.Start(log, &c.Hooks)
	if err != nil {
		return err
	}
	defer ms.Stop()
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	m := monitor.New(st, monitor.Config{Interval: c.Interval, Skew: c.Skew, QueuedTimeout: c.QueuedTimeout, Logger: log,
		AdoptPages: cmp.Or(c.AdoptPages, -1), Observer: ms.Monitor()}) // the flag's 0 is none, the Config's the default
	sched, _ := st.(schedule.Store)
	deliverer := c.deliverer(st, c.Interval, log, ms.Notify())
	if c.Once {
		var tickErr error
		if sched != nil {
			if _, err := schedule.Tick(ctx, sched, time.Now(), log.Named("schedule")); errors.Is(err, state.ErrUnavailable) {
				return err // the sweep would wait for the store the same
			} else if err != nil {
				log.Error("firing schedules failed", "error", err)
				tickErr = fmt.Errorf("firing schedules: %w", err) // sweep all the same, then fail
			}
		}
		r, err := m.Sweep(ctx)
		if deliverer != nil {
			deliverer.Once(ctx)
		}
		log.Info("sweep done", "timed_out", r.TimedOut, "failed_launches", r.FailedLaunches, "cancelled", r.Cancelled,
			"cancelled_running", r.CancelledRunning, "repaired", r.Repaired, "readied", r.Readied, "cancelled_downstream", r.CancelledDown,
			"settled", r.Settled, "failed_starts", r.FailedStarts, "adopted", r.Adopted, "undecodable", r.Undecodable)
		return errors.Join(err, tickErr)
	}
	log.Info("sweeping", "interval", c.Interval, "skew", c.Skew, "default_queued_timeout", c.QueuedTimeout)
	ticked := make(chan struct{})
	ctx, cancel := context.WithCancel(ctx)
	go func() { // owned: cancelled and waited for below
		defer close(ticked)
		if sched != nil {
			_ = schedule.Run(ctx, sched, c.Interval, log.Named("schedule"), ms.Ticked)
		}
	}()
	stopDelivering := startDeliverer(ctx, deliverer)
	err = m.Run(ctx)
	cancel()
	stopDelivering()
	<-ticked
	return err
}
