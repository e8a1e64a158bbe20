package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/docker"
	"github.com/whimbrel/whimbrel/launcher/ecs"
	"github.com/whimbrel/whimbrel/launcher/kubernetes"
	"github.com/whimbrel/whimbrel/launcher/local"
)

// backends are the launch types this launcher serves, checked, and what
// serves each but local (built last, with the launcher it reports to).
type backends struct {
	types           []string
	ready           map[string]launcher.Backend
	wrapper, logDir string // of local activities
	supervise       string
	local           *local.Backend
}

func (b *backends) serves(t string) bool { return slices.Contains(b.types, t) }

// checkBackends checks what can be checked before claiming anything, since
// a launcher that cannot launch would fail every activity it claims: the
// log folder, the docker CLI, the ECS cluster. A type served by default
// (no --types: local, docker, ecs) that cannot be served is dropped, and
// said so; one named in --types stops the launcher.
func (c *CLI) checkBackends(ctx context.Context, log hclog.Logger) (*backends, error) {
	explicit := len(c.Types) > 0
	b := &backends{types: slices.Clone(c.Types), ready: map[string]launcher.Backend{}, wrapper: c.Wrapper, logDir: c.LogDir}
	if !explicit {
		b.types = launcher.Types()
	}
	drop := func(t string) { b.types = slices.DeleteFunc(b.types, func(u string) bool { return u == t }) }
	if b.serves(definition.LaunchLocal) && c.LogDir != "" {
		if err := local.CheckLogDir(c.LogDir); err != nil {
			return nil, err
		}
	}
	if b.serves(definition.LaunchDocker) {
		switch _, err := exec.LookPath(c.Docker); {
		case err != nil && explicit:
			return nil, fmt.Errorf("docker CLI %q not found: install Docker, name the CLI with --docker, or leave docker out of --types", c.Docker)
		case err != nil:
			log.Info("docker CLI not found: docker activities are left to other launchers", "docker", c.Docker)
			drop(definition.LaunchDocker)
		default:
			b.ready[definition.LaunchDocker] = &docker.Backend{Binary: c.Docker, PassEnv: c.PassEnv}
		}
	}
	if b.serves(definition.LaunchECS) {
		switch {
		case c.ECSCluster == "" && explicit:
			return nil, &cli.UsageError{Msg: "--types ecs needs --ecs-cluster (or WHIMBREL_ECS_CLUSTER): the ECS cluster for activities whose definition names none, checked at start"}
		case c.ECSCluster == "":
			drop(definition.LaunchECS)
		default:
			cctx, cancel := context.WithTimeout(ctx, launcher.DefaultStartTimeout)
			defer cancel()
			e, err := ecs.Connect(cctx, c.ECSCluster, log)
			if err != nil {
				return nil, err
			}
			b.ready[definition.LaunchECS] = e
		}
	}
	if b.serves(definition.LaunchKubernetes) && !explicit {
		drop(definition.LaunchKubernetes) // a cluster is only used when asked for
	} else if b.serves(definition.LaunchKubernetes) {
		cctx, cancel := context.WithTimeout(ctx, launcher.DefaultStartTimeout)
		defer cancel()
		k, err := kubernetes.Connect(cctx, c.Kubeconfig, c.K8sNS, log.Named("kubernetes"))
		if err != nil {
			return nil, err
		}
		b.ready[definition.LaunchKubernetes] = k
	}
	return b, nil
}

// launcher builds the launcher of cfg with a backend for each type served.
// Its local activities nudge nl (nil: no nudges, as in a single pass).
func (b *backends) launcher(st launcher.Store, cfg launcher.Config, log hclog.Logger, nl *nudge.Listener) (*launcher.Launcher, error) {
	cfg.Backends = b.ready
	if !b.serves(definition.LaunchLocal) {
		return launcher.New(st, cfg), nil
	}
	wrapper, err := local.WrapperOr(b.wrapper)
	if err != nil && b.supervise != local.SuperviseInline { // inline needs it only for --api simple
		return nil, &cli.UsageError{Msg: err.Error()}
	}
	b.local = &local.Backend{Wrapper: wrapper, LogDir: b.logDir, Logger: log.Named("local"), Supervise: b.supervise}
	return local.NewLauncher(st, cfg, b.local, nl), nil
}
