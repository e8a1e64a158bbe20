// Command whimbrel-launcher claims launchable activities and starts them:
// as local processes, Docker containers or ECS tasks. See package launcher.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

const description = `Claim READY activities and start them. Each claim is one conditional write to QUEUED, so any number of
launchers may run at once and none launches an activity twice. A launch that
fails ends the activity FAILED with the reason.

Launch types (per activity in the workflow definition, default local):
  local    whimbrel-run -- COMMAND as a child process of this launcher
  docker   docker run --detach IMAGE [COMMAND]; the image's entrypoint is whimbrel-run
  ecs      ecs:RunTask of the task definition, identity as environment overrides

On SIGTERM or SIGINT it stops claiming, finishes the backend calls in flight,
records them and exits; a launch that would have been retried is failed with
its last error, never left QUEUED. Local activities already started run on
under their own wrappers.

Launches run side by side (--workers). A launch that fails for a reason that
may pass (throttling, 5xx, an unreachable endpoint, ECS short of capacity) is
retried with backoff, under the same launch token, for --retry-for (or the
definition's launch.retry_for); any other failure fails the activity at once.

At start it refuses, with one line, a --log-dir it cannot create or write, a
docker CLI it cannot find, ECS without a cluster or a region, and a store it
cannot reach.

Examples:
  whimbrel-launcher                         poll every second
  whimbrel-launcher --once                  one pass, for cron or a scheduled task
  whimbrel-launcher --types ecs --ecs-cluster batch --max-running 50`

// CLI is the whole grammar of whimbrel-launcher.
type CLI struct {
	cli.LogFlags
	cli.StoreFlags
	Version kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Once        bool          `name:"once" help:"Make one pass and exit."`
	Interval    time.Duration `name:"interval" default:"${default_interval}" help:"Time between polls (a local activity that readies another wakes the launcher at once)."`
	MaxRunning  int           `name:"max-running" default:"0" help:"Most activities started by this launcher that may run at once (0: no limit)."`
	Workers     int           `name:"workers" default:"${default_workers}" help:"Launches carried out at once, so that one slow backend call never holds up the others."`
	RetryFor    time.Duration `name:"retry-for" default:"${default_retry_for}" help:"How long a launch that fails for a reason that may pass (throttling, 5xx, an unreachable endpoint, ECS short of capacity) is retried before its activity is failed; a definition's launch.retry_for wins."`
	CallTimeout time.Duration `name:"call-timeout" default:"${default_call_timeout}" help:"Deadline of one backend call (RunTask; docker run, which may pull its image, gets at least 2m); a call cut off by it is retried under the same launch token."`
	Types       []string      `name:"types" placeholder:"local,docker,ecs" help:"Launch types this launcher serves; activities of other types are left to other launchers. Default: local, docker if the docker CLI is found, ecs if --ecs-cluster is given. A type named here that cannot be served stops the launcher at start."`
	Wrapper     string        `name:"wrapper" type:"path" help:"The whimbrel-run binary for local activities (default: beside this binary, else on PATH)."`
	LogDir      string        `name:"log-dir" type:"path" help:"Write each local activity's output to DIR/ACTIVITY_EXEC_ID.log instead of this launcher's stdout and stderr (created if missing)."`
	Docker      string        `name:"docker" default:"docker" help:"The docker CLI."`
	PassEnv     []string      `name:"pass-env" default:"AWS_REGION,AWS_DEFAULT_REGION" help:"Variables of this launcher's environment also handed to docker containers."`
	ECSCluster  string        `name:"ecs-cluster" env:"WHIMBREL_ECS_CLUSTER" help:"The ECS cluster of activities whose definition names none; checked at start. Needed to serve ecs."`
}

// startTimeout bounds each check made at start.
const startTimeout = 20 * time.Second

func main() {
	var c CLI
	cli.Main(cli.Program{Name: "whimbrel-launcher", Description: description, Vars: kong.Vars{"default_interval": cli.FlagDuration(launcher.DefaultInterval), "default_workers": fmt.Sprint(launcher.DefaultWorkers), "default_retry_for": cli.FlagDuration(launcher.DefaultRetryFor), "default_call_timeout": cli.FlagDuration(launcher.DefaultCallTimeout)}}, &c)
}

// Run checks what can be checked, wires the backends and runs the
// launcher.
func (c *CLI) Run(k *kong.Context) error {
	for _, t := range c.Types {
		if !slices.Contains([]string{workflow.LaunchLocal, workflow.LaunchDocker, workflow.LaunchECS}, t) {
			return &cli.UsageError{Msg: fmt.Sprintf("--types: %q is not a launch type: use local, docker or ecs", t)}
		}
	}
	if c.MaxRunning < 0 || c.Interval <= 0 || c.Workers <= 0 || c.RetryFor <= 0 || c.CallTimeout <= 0 {
		return &cli.UsageError{Msg: "--max-running must be 0 or more, and --interval, --workers, --retry-for and --call-timeout positive"}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := c.Logger("whimbrel-launcher", k.Stderr)
	explicit := len(c.Types) > 0
	types := c.Types
	if !explicit {
		types = []string{workflow.LaunchLocal, workflow.LaunchDocker, workflow.LaunchECS}
	}
	serves := func(t string) bool { return slices.Contains(types, t) }

	// Check what can be checked before claiming anything: a launcher that
	// cannot launch would fail every activity it claims.
	if serves(workflow.LaunchLocal) && c.LogDir != "" {
		if err := checkLogDir(c.LogDir); err != nil {
			return err
		}
	}
	if serves(workflow.LaunchDocker) {
		if _, err := exec.LookPath(c.Docker); err != nil {
			if explicit {
				return fmt.Errorf("docker CLI %q not found: install Docker, name the CLI with --docker, or leave docker out of --types", c.Docker)
			}
			log.Info("docker CLI not found: docker activities are left to other launchers", "docker", c.Docker)
			types = slices.DeleteFunc(types, func(t string) bool { return t == workflow.LaunchDocker })
		}
	}
	var ecsBackend *launcher.ECS
	if serves(workflow.LaunchECS) {
		switch {
		case c.ECSCluster == "" && explicit:
			return &cli.UsageError{Msg: "--types ecs needs --ecs-cluster (or WHIMBREL_ECS_CLUSTER): the ECS cluster for activities whose definition names none, checked at start"}
		case c.ECSCluster == "":
			types = slices.DeleteFunc(types, func(t string) bool { return t == workflow.LaunchECS })
		default:
			var err error
			if ecsBackend, err = connectECS(ctx, c.ECSCluster, log); err != nil {
				return err
			}
		}
	}
	st, err := c.Open(ctx, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkStore(ctx, st, c.Resolved(cli.DefaultStore), c.Prefix); err != nil {
		return err
	}

	cfg := launcher.Config{
		Backends:    map[string]launcher.Backend{},
		Interval:    c.Interval,
		MaxRunning:  c.MaxRunning,
		Workers:     c.Workers,
		RetryFor:    c.RetryFor,
		CallTimeout: c.CallTimeout,
		StoreEnv:    map[string]string{"WHIMBREL_STORE": c.Resolved(cli.DefaultStore), "WHIMBREL_TABLE_PREFIX": c.Prefix},
		Logger:      log,
	}
	if serves(workflow.LaunchLocal) {
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
	if serves(workflow.LaunchDocker) {
		cfg.Backends[workflow.LaunchDocker] = &launcher.Docker{Binary: c.Docker, PassEnv: c.PassEnv}
	}
	if serves(workflow.LaunchECS) {
		cfg.Backends[workflow.LaunchECS] = ecsBackend
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
	log.Info("launching", "types", types, "interval", c.Interval, "workers", c.Workers, "max_running", c.MaxRunning)
	return l.Run(ctx)
}

// checkLogDir makes sure local activities' logs can be written.
func checkLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--log-dir %s cannot be created: %w", dir, cause(err))
	}
	f, err := os.CreateTemp(dir, ".whimbrel-launcher-check-*")
	if err != nil {
		return fmt.Errorf("--log-dir %s is not writable: %w", dir, cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// cause drops the path an *os.PathError repeats.
func cause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// connectECS builds the ECS client and checks that the cluster answers.
func connectECS(ctx context.Context, cluster string, log hclog.Logger) (*launcher.ECS, error) {
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration for ECS: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("ECS needs a region: set AWS_REGION (or a profile's region with AWS_PROFILE)")
	}
	client := launcher.NewECSClient(awsCfg)
	cctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	out, err := client.DescribeClusters(cctx, &ecs.DescribeClustersInput{Clusters: []string{cluster}})
	var api smithy.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		log.Warn("cannot check the ECS cluster at start: the launcher's role lacks ecs:DescribeClusters", "cluster", cluster)
	case err != nil:
		return nil, fmt.Errorf("cannot reach ECS in %s to check cluster %q: %w", awsCfg.Region, cluster, err)
	case len(out.Clusters) == 0 || aws.ToString(out.Clusters[0].Status) == "INACTIVE":
		return nil, fmt.Errorf("ECS cluster %q does not exist in %s (or is inactive): name an active one with --ecs-cluster", cluster, awsCfg.Region)
	}
	return &launcher.ECS{API: client, Cluster: cluster}, nil
}

// checkStore makes one bounded read of the state index, so a store that
// cannot be reached stops the launcher at start with one line.
func checkStore(ctx context.Context, st state.Store, store, prefix string) error {
	cctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if _, err := st.ActivitiesInState(cctx, state.ActivityQuery{State: state.Ready, Limit: 1}); err != nil {
		return fmt.Errorf("cannot reach the store (%s, prefix %q): %w", store, prefix, err)
	}
	return nil
}
