// Command whimbrel-launcher claims launchable activities and starts them:
// as local processes, Docker containers or ECS tasks. See package launcher.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/whimbrel/whimbrel/internal/cli"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/workflow"
)

const description = `Claim READY activities and start them. Each claim is one conditional write to QUEUED, so any number of
launchers may run at once and none launches an activity twice. A launch that
fails ends the activity FAILED with the reason.

Launch types (per activity in the workflow definition, default local):
  local    whimbrel-run -- COMMAND as a child process of this launcher
  docker   docker run --detach IMAGE [COMMAND]; the image's entrypoint is whimbrel-run
  ecs      ecs:RunTask of the task definition, identity as environment overrides

On SIGTERM or SIGINT it stops claiming, finishes the launches in flight and
exits; local activities already started run on under their own wrappers.

Examples:
  whimbrel-launcher                         poll every second, all launch types
  whimbrel-launcher --once                  one pass, for cron or a scheduled task
  whimbrel-launcher --types ecs --max-running 50`

// CLI is the whole grammar of whimbrel-launcher.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Once       bool          `name:"once" help:"Make one pass and exit."`
	Interval   time.Duration `name:"interval" default:"1s" help:"Time between polls (a local activity that readies another wakes the launcher at once)."`
	MaxRunning int           `name:"max-running" default:"0" help:"Most activities started by this launcher that may run at once (0: no limit)."`
	Types      []string      `name:"types" default:"local,docker,ecs" help:"Launch types this launcher serves; activities of other types are left to other launchers."`
	Wrapper    string        `name:"wrapper" type:"path" help:"The whimbrel-run binary for local activities (default: beside this binary, else on PATH)."`
	LogDir     string        `name:"log-dir" type:"path" help:"Write each local activity's output to DIR/ACTIVITY_EXEC_ID.log instead of this launcher's stdout and stderr."`
	Docker     string        `name:"docker" default:"docker" help:"The docker CLI."`
	PassEnv    []string      `name:"pass-env" default:"AWS_REGION,AWS_DEFAULT_REGION" help:"Variables of this launcher's environment also handed to docker containers."`
}

func main() {
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-launcher", Description: description}, &c)
}

// Run wires the backends and runs the launcher.
func (c *CLI) Run(k *kong.Context) error {
	for _, t := range c.Types {
		if !slices.Contains([]string{workflow.LaunchLocal, workflow.LaunchDocker, workflow.LaunchECS}, t) {
			return &cli.UsageError{Msg: fmt.Sprintf("--types: %q is not a launch type: use local, docker or ecs", t)}
		}
	}
	if c.MaxRunning < 0 || c.Interval <= 0 {
		return &cli.UsageError{Msg: "--max-running must be 0 or more and --interval positive"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := c.Logger("whimbrel-launcher", k.Stderr)
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	cfg := launcher.Config{
		Backends:   map[string]launcher.Backend{},
		Interval:   c.Interval,
		MaxRunning: c.MaxRunning,
		StoreEnv:   map[string]string{"WHIMBREL_STORE": c.Resolved(cli.DefaultStore), "WHIMBREL_TABLE_PREFIX": c.Prefix},
		Logger:     log,
	}
	if slices.Contains(c.Types, workflow.LaunchLocal) {
		wrapper := c.Wrapper
		if wrapper == "" {
			if wrapper, err = launcher.FindWrapper(); err != nil {
				return &cli.UsageError{Msg: err.Error()}
			}
		}
		local := &launcher.Local{Wrapper: wrapper, LogDir: c.LogDir, Logger: log.Named("local")}
		if !c.Once {
			nl, err := nudge.Listen()
			if err != nil {
				return err
			}
			defer nl.Close()
			cfg.Nudge = nl.C()
			local.Env = append(os.Environ(), nudge.Env+"="+nl.Addr())
		}
		cfg.Backends[workflow.LaunchLocal] = local
	}
	if slices.Contains(c.Types, workflow.LaunchDocker) {
		cfg.Backends[workflow.LaunchDocker] = &launcher.Docker{Binary: c.Docker, PassEnv: c.PassEnv}
	}
	if slices.Contains(c.Types, workflow.LaunchECS) {
		awsCfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			return fmt.Errorf("load AWS configuration for ECS: %w", err)
		}
		cfg.Backends[workflow.LaunchECS] = &launcher.ECS{API: ecs.NewFromConfig(awsCfg)}
	}
	l := launcher.New(st, cfg)
	if local, ok := cfg.Backends[workflow.LaunchLocal].(*launcher.Local); ok {
		local.Exited = func(j launcher.Job, status string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l.Exited(ctx, j, status)
		}
	}
	if c.Once {
		n, err := l.Once(ctx)
		log.Info("pass done", "launched", n, "undecodable", l.Undecodable())
		return err
	}
	log.Info("launching", "types", c.Types, "interval", c.Interval, "max_running", c.MaxRunning)
	return l.Run(ctx)
}
