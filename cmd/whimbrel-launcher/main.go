// Command whimbrel-launcher claims launchable activities and starts them:
// as local processes, Docker containers or ECS tasks. See package launcher.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/metrics"
	"github.com/whimbrel/whimbrel/process"
)

// CLI is the whole grammar of whimbrel-launcher.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	metrics.Flag
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Once        bool          `name:"once" help:"Make one pass and exit."`
	Interval    time.Duration `name:"interval" default:"${default_interval}" help:"Time between polls (a local activity that readies another wakes the launcher at once)."`
	MaxRunning  int           `name:"max-running" default:"0" help:"Most activities started by this launcher that may run at once (0: no limit)."`
	Workers     int           `name:"workers" default:"${default_workers}" help:"Launches carried out at once, so that one slow backend call never holds up the others."`
	RetryFor    time.Duration `name:"retry-for" default:"${default_retry_for}" help:"How long a launch that fails for a reason that may pass (throttling, 5xx, an unreachable endpoint, ECS short of capacity) is retried before its activity is failed; a definition's launch.retry_for wins."`
	CallTimeout time.Duration `name:"call-timeout" default:"${default_call_timeout}" help:"Deadline of one backend call (RunTask; docker run, which may pull its image, gets at least 2m); a call cut off by it is retried under the same launch token."`
	Types       []string      `name:"types" placeholder:"local,docker,ecs,kubernetes" help:"Launch types this launcher serves; activities of other types are left to other launchers. Default: local, docker if the docker CLI is found, ecs if --ecs-cluster is given (kubernetes only when named). A type named here that cannot be served stops the launcher at start."`
	Wrapper     string        `name:"wrapper" type:"path" help:"The whimbrel-run binary for local activities (default: beside this binary, else on PATH)."`
	Supervise   string        `name:"supervise" env:"WHIMBREL_SUPERVISE" enum:"inline,process" default:"process" help:"How local activities are supervised: process starts a whimbrel-run process for each; inline supervises each in this process and starts only its command (less CPU per activity, a quicker hop; stopping this process stops them). See docs/launcher.md."`
	LogDir      string        `name:"log-dir" type:"path" help:"Write each local activity's output to DIR/ACTIVITY_EXEC_ID.log instead of this launcher's stdout and stderr (created if missing)."`
	Docker      string        `name:"docker" default:"docker" help:"The docker CLI."`
	PassEnv     []string      `name:"pass-env" default:"AWS_REGION,AWS_DEFAULT_REGION" help:"Variables of this launcher's environment also handed to docker containers."`
	ECSCluster  string        `name:"ecs-cluster" env:"WHIMBREL_ECS_CLUSTER" help:"The ECS cluster of activities whose definition names none; checked at start. Needed to serve ecs."`
	Kubeconfig  string        `name:"kubeconfig" type:"path" help:"The kubeconfig of the cluster of kubernetes activities (default: KUBECONFIG, else the in-cluster configuration). Served only when --types names kubernetes."`
	K8sNS       string        `name:"k8s-namespace" env:"WHIMBREL_K8S_NAMESPACE" help:"The namespace of kubernetes activities whose definition names none (default: the kubeconfig context's, else the launcher pod's, else default)."`
}

func main() {
	if code, ok := process.GroupGuardMain(); ok { // --supervise inline's guard process is this binary
		os.Exit(code)
	}
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-launcher", Description: description, Vars: kong.Vars{"default_interval": cli.FlagDuration(launcher.DefaultInterval), "default_workers": fmt.Sprint(launcher.DefaultWorkers), "default_retry_for": cli.FlagDuration(launcher.DefaultRetryFor), "default_call_timeout": cli.FlagDuration(launcher.DefaultCallTimeout)}}, &c)
}

// Run checks what can be checked, wires the backends and runs the
// launcher.
func (c *CLI) Run(k *kong.Context) error {
	if err := launcher.CheckTypes(c.Types); err != nil {
		return &cli.UsageError{Msg: err.Error()}
	}
	if c.MaxRunning < 0 || c.Interval <= 0 || c.Workers <= 0 || c.RetryFor <= 0 || c.CallTimeout <= 0 {
		return &cli.UsageError{Msg: "--max-running must be 0 or more, and --interval, --workers, --retry-for and --call-timeout positive"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := c.Logger("whimbrel-launcher", k.Stderr)
	b, err := c.checkBackends(ctx, log)
	if err != nil {
		return err
	}
	b.supervise = c.Supervise
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
	if err := launcher.CheckStore(ctx, st, fmt.Sprintf("%s, prefix %q", c.Resolved(cli.DefaultStore), c.Prefix), 0); err != nil {
		return err
	}
	var nl *nudge.Listener
	if b.serves(definition.LaunchLocal) && !c.Once {
		if nl, err = nudge.Listen(); err != nil {
			return err
		}
		defer nl.Close()
	}
	l, err := b.launcher(st, launcher.Config{Interval: c.Interval, MaxRunning: c.MaxRunning, Workers: c.Workers,
		RetryFor: c.RetryFor, CallTimeout: c.CallTimeout, Logger: log, Observer: ms.Launcher(st, 0),
		StoreEnv: map[string]string{"WHIMBREL_STORE": c.Resolved(cli.DefaultStore), "WHIMBREL_TABLE_PREFIX": c.Prefix}}, log, nl)
	if err != nil {
		return err
	}
	if c.Once {
		n, err := l.Once(ctx)
		b.waitInline()
		log.Info("pass done", "launched", n, "undecodable", l.Undecodable())
		return err
	}
	log.Info("launching", "types", b.types, "interval", c.Interval, "workers", c.Workers, "max_running", c.MaxRunning, "supervise", c.Supervise)
	defer b.stopInline()
	return l.Run(ctx)
}
