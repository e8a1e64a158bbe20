package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Docker starts each activity as a detached container through the docker
// CLI. The image's entrypoint must be whimbrel-run (ENTRYPOINT
// ["whimbrel-run", "--"]); the activity's command, if any, becomes the
// container's command. The container is named after the launch, so a
// repeated launch is refused by Docker instead of starting twice.
type Docker struct {
	// Binary is the docker CLI (default "docker" on PATH).
	Binary string
	// PassEnv names variables of the launcher's environment to hand to
	// every container as well, such as AWS_REGION.
	PassEnv []string
	// Timeout is the least deadline of one docker run, when longer than
	// the launcher's call timeout (default DefaultDockerTimeout).
	Timeout time.Duration
}

var _ Backend = (*Docker)(nil)

// DefaultDockerTimeout is the least deadline of one docker run, which may
// pull the image first.
const DefaultDockerTimeout = 2 * time.Minute

// CallTimeout is the least deadline of one docker run.
func (b *Docker) CallTimeout() time.Duration {
	if b.Timeout > 0 {
		return b.Timeout
	}
	return DefaultDockerTimeout
}

// maxError bounds an error text recorded on an item: the item must stay
// small.
const maxError = 2048

// Launch implements Backend.
func (b *Docker) Launch(ctx context.Context, j Job) (string, error) {
	bin := b.Binary
	if bin == "" {
		bin = "docker"
	}
	l := j.Settings.Launch
	// --rm: the outcome and the stderr tail are on the item; finished
	// containers would only pile up.
	args := []string{"run", "--detach", "--rm", "--name", "whimbrel-" + token(j),
		"--label", "whimbrel.activity_exec_id=" + j.Key.ActivityExecID,
		"--label", "whimbrel.workflow_exec_id=" + j.Key.WorkflowExecID}
	// Values go through the docker CLI's environment (-e NAME), not its
	// arguments, so they do not show in process listings.
	env := os.Environ()
	for _, kv := range envList(j.Env) {
		args = append(args, "--env", strings.SplitN(kv, "=", 2)[0])
		env = append(env, kv)
	}
	for _, name := range b.PassEnv {
		if _, ok := os.LookupEnv(name); ok {
			args = append(args, "--env", name)
		}
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
			if id := b.existing(ctx, bin, "whimbrel-"+token(j)); id != "" {
				return "container:" + id, nil
			}
		}
		err := fmt.Errorf("docker run %s: %s", l.Image, msg)
		if dockerTemporary(msg) {
			return "", &TemporaryError{Err: err}
		}
		return "", err
	}
	id := strings.TrimSpace(out.String())
	if id == "" {
		return "", fmt.Errorf("docker run %s printed no container ID", l.Image)
	}
	return "container:" + id, nil
}

// existing returns the ID of the container named name, or "".
func (b *Docker) existing(ctx context.Context, bin, name string) string {
	out, err := exec.CommandContext(ctx, bin, "container", "inspect", "--format", "{{.Id}}", name).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
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
