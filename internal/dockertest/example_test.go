//go:build docker && linux

package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	dockerbackend "github.com/whimbrel/whimbrel/launcher/docker"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestExample builds examples/docker's image the air-gapped way
// (build-rootfs.sh, docker import) and runs examples/docker/workflow.yaml
// through the Docker backend, as docs/wrapper.md says, in a directory of its own.
func TestExample(t *testing.T) {
	t.Parallel()
	tag := fmt.Sprintf("whimbrel-example-etl:test-%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "../../examples/docker/build-rootfs.sh", tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build-rootfs.sh: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = docker(t, "rmi", "--force", tag) })

	dir := t.TempDir()
	b, err := os.ReadFile("../../examples/docker/workflow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.ReplaceAll(string(b), "/tmp/whimbrel-example", dir)
	yaml = strings.ReplaceAll(yaml, "whimbrel-example-etl:latest", tag)
	d, err := definition.Parse("workflow.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "dockertest"})
	if err != nil {
		t.Fatal(err)
	}
	l := launcher.New(st, launcher.Config{
		Backends: map[string]launcher.Backend{definition.LaunchDocker: &dockerbackend.Backend{}},
		Interval: 200 * time.Millisecond,
		StoreEnv: map[string]string{"WHIMBREL_STORE": "sqlite:" + path},
		Workflow: id,
	})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(lctx) }()
	defer func() { stop(); <-done }()
	var w *state.WorkflowExec
	waitFor(t, 2*time.Minute, "the example workflow to settle", func() bool {
		w, err = st.GetWorkflow(ctx, id)
		return err == nil && w.State.Terminal()
	})
	if w.State != state.WorkflowCompleted {
		t.Errorf("example workflow %s (%s), want COMPLETED", w.State, w.Reason)
	}
}
