package docker_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/docker"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestDockerBackend runs a stand-in docker CLI that records its arguments
// and environment.
func TestDockerBackend(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	record := filepath.Join(dir, "record")
	fake := filepath.Join(dir, "docker")
	script := `#!/bin/sh
case "$*" in *etl:missing*) echo "Unable to find image 'etl:missing' locally" >&2; exit 125;; esac
echo "$@" > ` + record + `
echo "id=$WHIMBREL_ACTIVITY_EXEC_ID" >> ` + record + `
echo 4f2c9e1d8b7a
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	st := dynamotest.NewStore(t, dynamodb.Options{})
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchDocker: &docker.Backend{Binary: fake}}})
	id, _ := launchtest.Start(t, st, "name: d\nactivities:\n  a:\n    command: [./etl.sh, nightly]\n    launch: {type: docker, image: 'etl:9', docker_args: [--network, host]}\n")
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d %v", n, err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	got := string(b)
	for _, want := range []string{"run --detach --rm --name whimbrel-", "--env WHIMBREL_ACTIVITY_EXEC_ID", "--network host etl:9 ./etl.sh nightly",
		"id=" + key.ActivityExecID} {
		if !strings.Contains(got, want) {
			t.Errorf("docker got:\n%s\nwant it to contain %q", got, want)
		}
	}
	if a, err := st.GetActivity(launchtest.Context(t), key); err != nil || a.LaunchedAs != "container:4f2c9e1d8b7a" {
		t.Errorf("activity: %+v %v", a, err)
	}

	id2, _ := launchtest.Start(t, st, "name: d\nactivities:\n  a:\n    launch: {type: docker, image: 'etl:missing'}\n")
	if _, err := l.Once(launchtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	a, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id2, "a"), WorkflowExecID: id2})
	if err != nil || a.State != state.Failed || !strings.Contains(a.Error, "Unable to find image") {
		t.Errorf("failed docker run: %+v %v", a, err)
	}
}
