package launcher_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestDockerTemporaryErrors: a docker daemon that cannot be reached for a
// moment is waited for; a docker run cut off by the call deadline after it
// started the container is found again by the container's name instead of
// failing on it; a missing image fails at once.
func TestDockerTemporaryErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake := filepath.Join(dir, "docker")
	script := `#!/bin/sh
state=` + dir + `
echo "$*" >> "$state/calls"
case "$1" in
run)
  name=$5
  n=$(cat "$state/$name.count" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$state/$name.count"
  case "$*" in
  *flaky*)
    if [ $n -le 2 ]; then echo "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?" >&2; exit 125; fi;;
  *slow*)
    if [ $n -eq 1 ]; then echo started > "$state/$name.exists"; exec sleep 30; fi
    echo "docker: Error response from daemon: Conflict. The container name \"/$name\" is already in use by container \"c0ffee\". You have to remove (or rename) that container to be able to reuse that name." >&2
    exit 125;;
  *missing*)
    echo "Unable to find image 'etl:missing' locally" >&2; exit 125;;
  esac
  echo "id-$n";;
container)
  if [ -f "$state/$5.exists" ]; then echo c0ffee; exit 0; fi
  echo "Error: No such container: $5" >&2; exit 1;;
esac
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, "name: d\nactivities:\n"+
		"  flaky: {command: [run], launch: {type: docker, image: 'etl:flaky'}}\n"+
		"  slow: {command: [run], launch: {type: docker, image: 'etl:slow'}}\n"+
		"  missing: {command: [run], launch: {type: docker, image: 'etl:missing'}}\n")
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchDocker: &launcher.Docker{Binary: fake, Timeout: time.Second}},
		CallTimeout: 2 * time.Second, RetryInterval: 10 * time.Millisecond})
	if n, err := l.Once(testbin.Context(t)); n != 2 || err != nil {
		t.Fatalf("Once: launched %d, %v; want 2", n, err)
	}
	for name, want := range map[string]string{"flaky": "container:id-3", "slow": "container:c0ffee"} {
		if a := activity(t, st, id, name); a.State != state.Queued || a.LaunchedAs != want {
			t.Errorf("%s: %s launched as %q, want QUEUED as %q", name, a.State, a.LaunchedAs, want)
		}
	}
	calls, err := os.ReadFile(filepath.Join(dir, "calls"))
	if err != nil {
		t.Fatal(err)
	}
	if a := activity(t, st, id, "missing"); a.State != state.Failed || !strings.Contains(a.Reason, "Unable to find image") {
		t.Errorf("missing: %s, reason %q; want FAILED with docker's message", a.State, a.Reason)
	}
	if n := strings.Count(string(calls), "etl:missing"); n != 1 {
		t.Errorf("docker run of a missing image was tried %d times, want 1", n)
	}
	if n := strings.Count(string(calls), "etl:flaky"); n != 3 {
		t.Errorf("docker run of etl:flaky was tried %d times, want 3", n)
	}
}
