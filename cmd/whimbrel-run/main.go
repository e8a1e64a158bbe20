// Command whimbrel-run wraps one activity's command: as a Docker
// ENTRYPOINT, in an ECS task, or under local supervision. See package
// wrapper for what it does.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/heartbeat"
	"github.com/whimbrel/whimbrel/process"
	"github.com/whimbrel/whimbrel/simpleapi/report"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/wrapper"
)

func main() {
	// The guard process that process.Start starts is this binary, re-run:
	// it becomes the guard before anything else happens.
	if code, ok := process.GuardMain(); ok {
		os.Exit(code)
	}
	wrapper.TuneRuntime()
	// Caught before anything else (parsing, opening the store): as PID 1,
	// a SIGTERM that came before would end the wrapper with nothing logged
	// or recorded. wrapper.Run handles what is caught.
	c := CLI{signals: wrapper.CatchSignals()}
	process.CloseInheritedGuardPipe(state.EnvGuardFD)
	cli.Main(cli.Program{Name: "whimbrel-run", Description: description,
		UsageExit: state.ExitWrapperError, FailureExit: state.ExitWrapperError,
		Vars: kong.Vars{"default_record_timeout": cli.FlagDuration(wrapper.DefaultRecordTimeout)}}, &c)
}

// Run checks the command line, then runs the activity.
func (c *CLI) Run(k *kong.Context) error {
	key, err := c.identity()
	if err != nil {
		return err
	}
	if len(c.Command) > 0 && c.Command[0] == "--" {
		c.Command = c.Command[1:]
	}
	if len(c.Command) == 0 {
		return &cli.UsageError{Msg: "no command to run: give it after --, as in: whimbrel-run -- CMD [ARGS...]"}
	}
	if !c.NoHeartbeat {
		if err := heartbeat.Check(c.HeartbeatInterval, c.HeartbeatTimeout); err != nil {
			return &cli.UsageError{Msg: err.Error()}
		}
	}
	for name, d := range map[string]time.Duration{"--kill-grace": c.KillGrace, "--timeout": c.Timeout, "--record-timeout": c.RecordTimeout} {
		if d < 0 {
			return &cli.UsageError{Msg: fmt.Sprintf("%s %s is negative", name, d)}
		}
	}
	pdeath, err := parseSignal(c.ParentDeathSignal)
	if err != nil {
		return err
	}
	log := c.Logger("whimbrel-run", k.Stderr)
	ctx := context.Background()
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	reporter := wrapper.Direct(st)
	if c.API == "simple" {
		host, _ := os.Hostname()
		reporter = &report.Client{Store: st, Source: fmt.Sprintf("whimbrel-run on %s (pid %d)", host, os.Getpid()),
			Logger: log.Named("simple")}
	}
	watcher, _ := st.(wrapper.Watcher) // the embedded store wakes its wrappers
	code := wrapper.Run(ctx, reporter, wrapper.Config{
		Key:                    key,
		Command:                c.Command,
		Heartbeat:              !c.NoHeartbeat,
		HeartbeatInterval:      c.HeartbeatInterval,
		HeartbeatTimeout:       c.HeartbeatTimeout,
		KeepRunningOnLeaseLoss: c.KeepRunningOnLeaseLoss,
		KillGrace:              c.KillGrace,
		Timeout:                c.Timeout,
		RecordTimeout:          c.RecordTimeout,
		Subreaper:              c.Subreaper,
		SignalChildOnly:        c.SignalChildOnly,
		Guard:                  c.Guard,
		GuardPipe:              guardPipe(c.GuardFD, log),
		ParentDeathSignal:      pdeath,
		Nudge:                  c.Nudge,
		DataDir:                c.DataDir,
		Watcher:                watcher,
		Signals:                c.signals,
		Stdin:                  os.Stdin,
		Stdout:                 os.Stdout,
		Stderr:                 os.Stderr,
		Logger:                 log,
	})
	if code != 0 {
		return &cli.ExitError{Code: code}
	}
	return nil
}
