//go:build linux

package main

import (
	"context"
	"fmt"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	locallauncher "github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/local"
	"github.com/whimbrel/whimbrel/local/view"
	"github.com/whimbrel/whimbrel/state"
)

// runHere launches the activities as local processes (supervised in this
// process, or each under whimbrel-run: --supervise), monitors them in this
// process, shows the progress, and returns when the workflow settles. Only Linux runs activities: the wrapper supervises its
// command through Linux process groups and signals.
func runHere(ctx context.Context, k *kong.Context, h here, st state.Store, d *definition.Workflow, start func(context.Context) (string, error)) error {
	if h.MaxRunning < 0 {
		return &cli.UsageError{Msg: fmt.Sprintf("--max-running %d is negative: give 0 (no cap) or the most activities to run at once", h.MaxRunning)}
	}
	wrapper, err := locallauncher.WrapperFor(h.Wrapper, h.Supervise)
	if err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	logDir, err := h.logDir()
	if err != nil {
		return err
	}
	interrupt, stop := local.Interrupts()
	defer stop()
	res, err := local.Run(ctx, st, d, local.Options{
		Wrapper:    wrapper,
		Supervise:  h.Supervise,
		StoreEnv:   h.storeEnv(),
		LogDir:     logDir,
		Events:     view.New(d, view.For(k.Stdout, h.JSON)),
		Interrupt:  interrupt,
		Logger:     h.log,
		Start:      start,
		Started:    h.started,
		Params:     h.params,
		MaxRunning: h.MaxRunning,

		LaunchObserver:  h.metrics.Launcher(st, 0),
		MonitorObserver: h.metrics.Monitor(),
		NotifyObserver:  h.metrics.Notify(), WebURL: h.WebURL,
	})
	if err != nil {
		return err
	}
	return settled(res.Workflow)
}
