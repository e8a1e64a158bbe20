package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const etl = `name: nightly-etl
activities:
  extract:
    command: ["sh", "-c", "echo extracting"]
  transform:
    depends_on: [extract]
    command: ["sh", "-c", "echo transforming"]
`

func TestStartCommand(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	file := writeFile(t, "etl.yaml", etl)

	out, errOut, code := whimbrel(t, env, "start", file, "--request-id", "nightly-2026-11-21")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "nightly-etl::") {
		t.Fatalf("start: exit %d stdout %q stderr %s", code, out, errOut)
	}
	wf, err := st.GetWorkflow(context.Background(), id)
	if err != nil || wf.State != state.WorkflowRunning {
		t.Fatalf("workflow %+v, %v", wf, err)
	}
	out, errOut, code = whimbrel(t, env, "start", file, "--request-id", "nightly-2026-11-21")
	if code != 0 || strings.TrimSpace(out) != id || !strings.Contains(errOut, "already started") {
		t.Errorf("second start: exit %d stdout %q stderr %q; want the same ID", code, out, errOut)
	}

	// --retention goes with the stored definition; a bad one is refused.
	out, _, code = whimbrel(t, env, "start", file, "--retention", "7d")
	kept, err := st.GetWorkflow(context.Background(), strings.TrimSpace(out))
	if code != 0 || err != nil || !strings.Contains(kept.Definition, `"retention":"168h0m0s"`) {
		t.Errorf("start --retention 7d: exit %d %v %+v", code, err, kept)
	}
	if _, errOut, code := whimbrel(t, env, "start", file, "--retention", "0d"); code != 2 || !strings.Contains(errOut, "--retention") {
		t.Errorf("--retention 0d: exit %d %s", code, errOut)
	}
}

func TestStartRefusesBadDefinitions(t *testing.T) {
	t.Parallel()
	env := dynamotest.Env(t, dynamotest.Prefix(t))
	bad := writeFile(t, "bad.yaml", "name: w\nactivities:\n  a:\n    command: [true]\n    depend_on: [b]\n")
	_, errOut, code := whimbrel(t, env, "start", bad)
	if code != 2 || !strings.Contains(errOut, "bad.yaml:5: activity \"a\": unknown field \"depend_on\" (did you mean \"depends_on\"?)") {
		t.Errorf("exit %d stderr:\n%s", code, errOut)
	}
	_, errOut, code = whimbrel(t, env, "start", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing file: exit %d stderr:\n%s", code, errOut)
	}
}

// TestStartWait runs a real launcher beside `whimbrel start --wait`.
func TestStartWait(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	launcher := exec.Command(filepath.Join(filepath.Dir(binary), "whimbrel-launcher"), "--interval", "200ms", "--log-dir", t.TempDir())
	launcher.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var lerr strings.Builder
	launcher.Stderr = &lerr
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = launcher.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = launcher.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = launcher.Process.Kill()
			t.Error("the launcher did not stop on SIGINT")
		}
	})

	out, errOut, code := whimbrel(t, env, "start", "--wait", "--wait-interval", "100ms", writeFile(t, "etl.yaml", etl))
	if code != 0 || !strings.Contains(errOut, "COMPLETED") {
		t.Fatalf("start --wait: exit %d stdout %q stderr %s\nlauncher:\n%s", code, out, errOut, lerr.String())
	}
	failing := writeFile(t, "fail.yaml", "name: failing\nactivities:\n  boom: {command: [sh, -c, 'exit 4']}\n  after: {command: [\"true\"], depends_on: [boom]}\n")
	_, errOut, code = whimbrel(t, env, "start", "--wait", "--wait-interval", "100ms", failing)
	if code != 1 || !strings.Contains(errOut, "FAILED: boom FAILED") {
		t.Errorf("failing start --wait: exit %d stderr %s", code, errOut)
	}
}
