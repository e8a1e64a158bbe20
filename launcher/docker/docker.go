// Package docker is the launcher's Docker backend: it starts each activity
// as a container through the docker CLI. Only a binary that serves the
// docker launch type links it.
package docker

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// Backend starts each activity as a detached container through the docker
// CLI. The image's entrypoint must be whimbrel-run (ENTRYPOINT
// ["whimbrel-run", "--"]); the activity's command, if any, becomes the
// container's command. The container is named after the launch, so a
// repeated launch is refused by Docker instead of starting twice.
type Backend struct {
	// Binary is the docker CLI (default "docker" on PATH).
	Binary string
	// PassEnv names variables of the launcher's environment to hand to
	// every container as well, such as AWS_REGION.
	PassEnv []string
	// Timeout is the least deadline of one docker run, when longer than
	// the launcher's call timeout (default DefaultTimeout).
	Timeout time.Duration
}

var _ launcher.Backend = (*Backend)(nil)

// DefaultTimeout is the least deadline of one docker run, which may pull
// the image first.
const DefaultTimeout = 2 * time.Minute

// CallTimeout is the least deadline of one docker run: the launcher gives
// each call at least this long.
func (b *Backend) CallTimeout() time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return DefaultTimeout
}

// StopMargin is how much longer than the kill grace a container's stop
// timeout is: time for the wrapper to kill the command and record its
// outcome.
const StopMargin = 10 * time.Second

// StopTimeout returns the stop timeout in whole seconds that the Docker
// backend gives a container whose wrapper has the given kill grace (0: the
// wrapper's default).
func StopTimeout(grace time.Duration) int {
	if grace <= 0 {
		grace = state.DefaultKillGrace
	}
	return int(math.Ceil((grace + StopMargin).Seconds()))
}

// hasFlag reports whether args hold flag, alone or as flag=value.
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// cliVariable reports whether the docker CLI reads the variable name
// itself.
func cliVariable(name string) bool {
	switch strings.ToUpper(name) {
	case "HOME", "PATH", "TMPDIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR":
		return true
	}
	return strings.HasPrefix(name, "DOCKER_") || strings.HasPrefix(name, "XDG_")
}

// maxError bounds an error text recorded on an item: the item must stay
// small.
const maxError = 2048

// Launch implements launcher.Backend.
func (b *Backend) Launch(ctx context.Context, j launcher.Job) (string, error) {
	bin := b.Binary
	if bin == "" {
		bin = "docker"
	}
	l := j.Settings.Launch
	// --rm: the outcome and the stderr tail are on the item; finished
	// containers would only pile up.
	args := []string{"run", "--detach", "--rm", "--name", "whimbrel-" + j.LaunchToken(),
		"--label", "whimbrel.activity_exec_id=" + j.Key.ActivityExecID,
		"--label", "whimbrel.workflow_exec_id=" + j.Key.WorkflowExecID}
	// Values go through the docker CLI's environment (-e NAME), not its
	// arguments, so they do not show in process listings; except those of
	// the variables the CLI itself reads (HOME, PATH, DOCKER_*, proxies),
	// which must stay the launcher's: a definition setting HOME or
	// DOCKER_HOST for its command must not send the CLI to another config
	// or daemon.
	env := os.Environ()
	for _, kv := range j.Environ() {
		name := strings.SplitN(kv, "=", 2)[0]
		if cliVariable(name) {
			args = append(args, "--env", kv)
			continue
		}
		args = append(args, "--env", name)
		env = append(env, kv)
	}
	for _, name := range b.PassEnv {
		// The job's own value wins, and is passed once.
		if _, ok := j.Env[name]; ok {
			continue
		}
		if _, ok := os.LookupEnv(name); ok {
			args = append(args, "--env", name)
		}
	}
	// docker stop sends SIGTERM, then SIGKILL after the stop timeout
	// (Docker's default: 10 s). The wrapper relays the SIGTERM and kills
	// the command itself after its kill grace, then records the outcome;
	// the engine must not kill the wrapper first.
	if !hasFlag(l.DockerArgs, "--stop-timeout") { // (docker run's -t is --tty)
		args = append(args, "--stop-timeout", strconv.Itoa(StopTimeout(time.Duration(j.Settings.KillGrace))))
	}
	args = append(args, l.DockerArgs...)
	args = append(args, l.Image)
	args = append(args, j.Command...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		if len(msg) > maxError {
			msg = "…" + msg[len(msg)-maxError:]
		}
		if strings.Contains(msg, "is already in use by container") {
			// An earlier attempt of this launch, cut off before its answer,
			// started the container: that is the launch.
			id, err := b.existing(ctx, bin, "whimbrel-"+j.LaunchToken())
			if err != nil {
				if dockerTemporary(err.Error()) {
					return "", &launcher.TemporaryError{Err: err}
				}
				return "", err
			}
			if id != "" {
				return "container:" + id, nil
			}
		}
		err := fmt.Errorf("docker run %s: %s", l.Image, msg)
		if dockerTemporary(msg) {
			return "", &launcher.TemporaryError{Err: err}
		}
		return "", err
	}
	id := strings.TrimSpace(out.String())
	if id == "" {
		return "", fmt.Errorf("docker run %s printed no container ID", l.Image)
	}
	return "container:" + id, nil
}

// existing returns the ID of the container named name, or "". The docker
// CLI creates a container and then starts it, in two calls: an earlier
// attempt cut off between them left a container that holds the name but
// never ran, so one found still "created" is started here.
func (b *Backend) existing(ctx context.Context, bin, name string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "container", "inspect", "--format", "{{.Id}} {{.State.Status}}", name).Output()
	if err != nil {
		return "", nil
	}
	id, status, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if status == "created" {
		var errOut bytes.Buffer
		start := exec.CommandContext(ctx, bin, "start", name)
		start.Stderr = &errOut
		if err := start.Run(); err != nil {
			msg := strings.TrimSpace(errOut.String())
			if msg == "" {
				msg = err.Error()
			}
			return "", fmt.Errorf("docker start %s (created by an earlier attempt that was cut off): %s", name, msg)
		}
	}
	return id, nil
}

// dockerTemporary tells the docker CLI's errors that may pass: a daemon
// or registry that cannot be reached or is overloaded.
func dockerTemporary(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"cannot connect to the docker daemon", "connection refused", "connection reset", "i/o timeout",
		"tls handshake timeout", "toomanyrequests", "too many requests", "500 internal server error", "502 bad gateway",
		"503 service unavailable", "504 gateway", "context deadline exceeded", "temporary failure in name resolution"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
