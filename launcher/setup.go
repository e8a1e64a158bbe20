package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/smithy-go"
	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Setup is what a launcher process (whimbrel-launcher) is built from: the
// launch types it serves and how it reaches each backend. Check it before
// opening the store, then build the launcher with Launcher.
type Setup struct {
	// Types are the launch types to serve. Empty: local, docker if its CLI
	// is found, ecs if ECSCluster is given.
	Types []string
	// Wrapper is the whimbrel-run binary of local activities ("": FindWrapper).
	Wrapper string
	// LogDir, when set, receives each local activity's output.
	LogDir string
	// Docker is the docker CLI; PassEnv the variables handed to containers.
	Docker  string
	PassEnv []string
	// ECSCluster is the cluster of activities whose definition names none.
	ECSCluster string
	// StartTimeout bounds each check made at start (0: 20 s).
	StartTimeout time.Duration
	Logger       hclog.Logger

	explicit bool
	ecs      *ECS
}

// SetupError is a setup that cannot work as given: a mistake of whoever
// chose it (a usage error, for a command), not a failure to reach a backend.
type SetupError struct{ Msg string }

func (e *SetupError) Error() string { return e.Msg }

// Serves reports whether the launcher serves launch type t (after Check:
// of the types served by default, those that cannot be served are dropped).
func (s *Setup) Serves(t string) bool { return slices.Contains(s.Types, t) }

// Check checks what can be checked before claiming anything, since a
// launcher that cannot launch would fail every activity it claims: the log
// folder, the docker CLI, the ECS cluster. A type served by default that
// cannot be served is dropped (and said so); one named in Types stops it.
func (s *Setup) Check(ctx context.Context) error {
	if err := CheckTypes(s.Types); err != nil {
		return err
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	s.explicit = len(s.Types) > 0
	if !s.explicit {
		s.Types = []string{workflow.LaunchLocal, workflow.LaunchDocker, workflow.LaunchECS}
	}
	if s.Serves(workflow.LaunchLocal) && s.LogDir != "" {
		if err := checkLogDir(s.LogDir); err != nil {
			return err
		}
	}
	if s.Serves(workflow.LaunchDocker) {
		if _, err := exec.LookPath(s.Docker); err != nil {
			if s.explicit {
				return fmt.Errorf("docker CLI %q not found: install Docker, name the CLI with --docker, or leave docker out of --types", s.Docker)
			}
			s.Logger.Info("docker CLI not found: docker activities are left to other launchers", "docker", s.Docker)
			s.drop(workflow.LaunchDocker)
		}
	}
	if s.Serves(workflow.LaunchECS) {
		switch {
		case s.ECSCluster == "" && s.explicit:
			return &SetupError{Msg: "--types ecs needs --ecs-cluster (or WHIMBREL_ECS_CLUSTER): the ECS cluster for activities whose definition names none, checked at start"}
		case s.ECSCluster == "":
			s.drop(workflow.LaunchECS)
		default:
			var err error
			if s.ecs, err = s.connectECS(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// defaultStartTimeout bounds each check made at start when
// Setup.StartTimeout is not set.
const defaultStartTimeout = 20 * time.Second

// startTimeout is StartTimeout, or its default: CheckStore may be called
// on a Setup that Check has not filled in, and a zero bound would fail
// every check.
func (s *Setup) startTimeout() time.Duration {
	if s.StartTimeout <= 0 {
		return defaultStartTimeout
	}
	return s.StartTimeout
}

// CheckTypes refuses, with a SetupError, a launch type that is not local,
// docker or ecs. Check calls it; a command may call it first, to say so
// before its other mistakes.
func CheckTypes(types []string) error {
	for _, t := range types {
		if !slices.Contains([]string{workflow.LaunchLocal, workflow.LaunchDocker, workflow.LaunchECS}, t) {
			return &SetupError{Msg: fmt.Sprintf("--types: %q is not a launch type: use local, docker or ecs", t)}
		}
	}
	return nil
}

func (s *Setup) drop(t string) {
	s.Types = slices.DeleteFunc(s.Types, func(u string) bool { return u == t })
}

// CheckStore makes a bounded read of the state index, so that a store
// that cannot be reached stops the launcher at start with one line; where
// names the store in that line. A malformed item among those read does
// not stop it: one bad item must never stop the fleet. Nor does a store
// that answers but refuses this once (DynamoDB's throttling, or a 500,
// still there after the SDK's own retries): the read is tried again
// within the start timeout.
func (s *Setup) CheckStore(ctx context.Context, st interface {
	ActivitiesInState(context.Context, state.ActivityQuery) ([]state.ActivityRef, error)
}, where string) error {
	cctx, cancel := context.WithTimeout(ctx, s.startTimeout())
	defer cancel()
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(200*time.Millisecond), backoff.WithMaxElapsedTime(0)), cctx)
	var last error
	err := backoff.Retry(func() error {
		_, err := st.ActivitiesInState(cctx, state.ActivityQuery{State: state.Ready, Limit: 1})
		// A READY item the store could not decode was read, so the store
		// is reachable; the store has reported the item, and passes skip
		// it.
		if _, err = state.Skipped(err); err == nil {
			return nil
		}
		last = err
		if errors.Is(err, state.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return backoff.Permanent(err) // unreachable, or not set up: say so now
		}
		return err
	}, b)
	if err != nil {
		if last != nil {
			err = last
		}
		return fmt.Errorf("cannot reach the store (%s): %w", where, err)
	}
	return nil
}

// Launcher builds the launcher of a checked Setup: cfg with a backend for
// each type served. Its local activities nudge nl (nil: no nudges, as in
// a single pass).
func (s *Setup) Launcher(st Store, cfg Config, nl *nudge.Listener) (*Launcher, error) {
	cfg.Backends = map[string]Backend{}
	if s.Serves(workflow.LaunchDocker) {
		cfg.Backends[workflow.LaunchDocker] = &Docker{Binary: s.Docker, PassEnv: s.PassEnv}
	}
	if s.Serves(workflow.LaunchECS) {
		cfg.Backends[workflow.LaunchECS] = s.ecs
	}
	if !s.Serves(workflow.LaunchLocal) {
		return New(st, cfg), nil
	}
	wrapper, err := WrapperOr(s.Wrapper)
	if err != nil {
		return nil, err
	}
	l, _ := NewWithLocal(st, cfg, &Local{Wrapper: wrapper, LogDir: s.LogDir, Logger: s.Logger.Named("local")}, nl)
	return l, nil
}

// WrapperOr is the whimbrel-run binary a --wrapper flag names, or the one
// FindWrapper finds when it names none; not finding one is a SetupError.
func WrapperOr(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	p, err := FindWrapper()
	if err != nil {
		return "", &SetupError{Msg: err.Error()}
	}
	return p, nil
}

// NewWithLocal returns a launcher of cfg with b as its local backend: b's
// wrappers are handed nl's address to wake the launcher when they ready
// another activity (nl nil: no nudges), and the launcher records each of
// b's children that exits without recording its own end.
func NewWithLocal(st Store, cfg Config, b *Local, nl *nudge.Listener) (*Launcher, *Local) {
	if cfg.Backends == nil {
		cfg.Backends = map[string]Backend{}
	}
	if nl != nil {
		cfg.Nudge = nl.C()
		b.Env = append(os.Environ(), nudge.Env+"="+nl.Addr())
	}
	cfg.Backends[workflow.LaunchLocal] = b
	l := New(st, cfg)
	b.Exited = func(j Job, status string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l.Exited(ctx, j, status)
	}
	return l, b
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
func (s *Setup) connectECS(ctx context.Context) (*ECS, error) {
	cluster := s.ECSCluster
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load the AWS configuration for ECS: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("ECS needs a region: set AWS_REGION (or a profile's region with AWS_PROFILE)")
	}
	client := NewECSClient(awsCfg)
	cctx, cancel := context.WithTimeout(ctx, s.startTimeout())
	defer cancel()
	out, err := client.DescribeClusters(cctx, &ecs.DescribeClustersInput{Clusters: []string{cluster}})
	var api smithy.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		s.Logger.Warn("cannot check the ECS cluster at start: the launcher's role lacks ecs:DescribeClusters", "cluster", cluster)
	case err != nil:
		return nil, fmt.Errorf("cannot reach ECS in %s to check cluster %q: %w", awsCfg.Region, cluster, err)
	case len(out.Clusters) == 0 || aws.ToString(out.Clusters[0].Status) == "INACTIVE":
		return nil, fmt.Errorf("ECS cluster %q does not exist in %s (or is inactive): name an active one with --ecs-cluster", cluster, awsCfg.Region)
	}
	return &ECS{API: client, Cluster: cluster}, nil
}
