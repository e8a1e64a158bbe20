package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/docker"
	"github.com/whimbrel/whimbrel/state"
)

// TestDockerArguments checks what the Docker backend hands the docker CLI:
// each variable once, even when --pass-env names one the job sets, and a
// stop timeout above the kill grace unless docker_args give their own.
func TestDockerArguments(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "docker")
	script := "#!/bin/sh\necho \"$@\" > " + record + "\necho 4f2c9e1d8b7a\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WHIMBREL_STORE", "dynamodb")
	t.Setenv("AWS_REGION", "eu-west-1")
	tests := []struct {
		name       string
		grace      time.Duration
		dockerArgs []string
		want       string // the --stop-timeout argument, or "" for none of ours
	}{
		{"default grace", 0, nil, "--stop-timeout 40"},
		{"grace 11s", 11 * time.Second, nil, "--stop-timeout 21"},
		{"grace 2.5s", 2500 * time.Millisecond, nil, "--stop-timeout 13"},
		{"given in docker_args", 0, []string{"--stop-timeout", "99"}, ""},
		{"given as --stop-timeout=", 0, []string{"--stop-timeout=5"}, ""},
		{"-t is --tty", 0, []string{"-t"}, "--stop-timeout 40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &docker.Backend{Binary: fake, PassEnv: []string{"WHIMBREL_STORE", "AWS_REGION"}}
			j := launcher.Job{
				Key:     state.ActivityKey{ActivityExecID: "a::1", WorkflowExecID: "w::1"},
				Command: []string{"true"},
				Env:     map[string]string{"WHIMBREL_STORE": "sqlite:/state/db", "WHIMBREL_ACTIVITY_EXEC_ID": "a::1"},
				Settings: definition.Settings{KillGrace: definition.Duration(tt.grace),
					Launch: &definition.Launch{Type: definition.LaunchDocker, Image: "img:1", DockerArgs: tt.dockerArgs}},
			}
			if _, err := b.Launch(context.Background(), j); err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			got := string(out)
			if n := strings.Count(got, "--env WHIMBREL_STORE "); n != 1 {
				t.Errorf("--env WHIMBREL_STORE given %d times, want once: %s", n, got)
			}
			if n := strings.Count(got, "--env AWS_REGION "); n != 1 {
				t.Errorf("--env AWS_REGION given %d times, want once: %s", n, got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want+" ") {
				t.Errorf("docker got %s, want %q", got, tt.want)
			}
			if tt.want == "" && strings.Count(got, "--stop-timeout") != 1 {
				t.Errorf("docker got %s, want only the docker_args' stop timeout", got)
			}
		})
	}
}

// TestDockerRepeatStartsCreatedContainer: a docker run cut off between
// creating its container and starting it (the CLI makes two calls) leaves
// the name taken by a container that never runs. The repeated launch must
// start that container, not report it as launched while it sits there
// until the queued timeout.
func TestDockerRepeatStartsCreatedContainer(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "docker")
	script := `#!/bin/sh
state=` + dir + `
echo "$*" >> "$state/calls"
case "$1" in
run)
  echo "docker: Error response from daemon: Conflict. The container name \"/$5\" is already in use by container \"c0ffee\". You have to remove (or rename) that container to be able to reuse that name." >&2
  exit 125;;
container)
  status=created; [ ! -f "$state/started" ] || status=running
  case "$4" in *State.Status*) echo "c0ffee $status";; *) echo c0ffee;; esac;;
start)
  touch "$state/started"; echo "$2";;
esac
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b := &docker.Backend{Binary: fake}
	j := launcher.Job{
		Key:      state.ActivityKey{ActivityExecID: "a::1", WorkflowExecID: "w::1"},
		Settings: definition.Settings{Launch: &definition.Launch{Type: definition.LaunchDocker, Image: "img:1"}},
	}
	as, err := b.Launch(context.Background(), j)
	if err != nil || as != "container:c0ffee" {
		t.Fatalf("Launch: %q, %v; want container:c0ffee", as, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "started")); err != nil {
		calls, _ := os.ReadFile(filepath.Join(dir, "calls"))
		t.Errorf("the created container holding the name was never started; docker calls:\n%s", calls)
	}
}

// TestDockerCLIKeepsItsOwnEnvironment: the definition's env is the
// container's, not the docker CLI's. A definition that sets HOME, PATH or
// DOCKER_HOST for its command must not send the launcher's docker CLI to
// another daemon or another config (registry credentials, credential
// helpers); the container still gets the definition's values.
func TestDockerCLIKeepsItsOwnEnvironment(t *testing.T) {
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "docker")
	script := "#!/bin/sh\n{ echo \"HOME=$HOME\"; echo \"DOCKER_HOST=$DOCKER_HOST\"; echo \"SECRET=$SECRET\"; echo \"$@\"; } > " + record + "\necho 4f2c9e1d8b7a\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", "/root/launcher-home")
	t.Setenv("DOCKER_HOST", "unix:///run/launcher.sock")
	b := &docker.Backend{Binary: fake}
	j := launcher.Job{
		Key:      state.ActivityKey{ActivityExecID: "a::1", WorkflowExecID: "w::1"},
		Env:      map[string]string{"HOME": "/work", "DOCKER_HOST": "tcp://elsewhere:2375", "SECRET": "s3cr3t"},
		Settings: definition.Settings{Launch: &definition.Launch{Type: definition.LaunchDocker, Image: "img:1"}},
	}
	if _, err := b.Launch(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{"HOME=/root/launcher-home\n", "DOCKER_HOST=unix:///run/launcher.sock\n", "SECRET=s3cr3t\n",
		"--env HOME=/work ", "--env DOCKER_HOST=tcp://elsewhere:2375 ", "--env SECRET "} {
		if !strings.Contains(got, want) {
			t.Errorf("docker CLI saw:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "s3cr3t ") {
		t.Errorf("a value that is not the CLI's own went into the arguments:\n%s", got)
	}
}
