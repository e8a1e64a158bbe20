package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// pathWithout is PATH without the folders that hold name.
func pathWithout(name string) string {
	var keep []string
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(d, name)); err != nil {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, string(os.PathListSeparator))
}

// TestRunInlineWithoutWrapper: a whimbrel with no whimbrel-run beside it
// nor on PATH runs a plain workflow inline to its end; an activity that
// asks for WHIMBREL_API=simple, which needs whimbrel-run, fails alone
// with an error naming --wrapper; --supervise process refuses to start.
func TestRunInlineWithoutWrapper(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "whimbrel")
	if err := os.Link(binary, bin); err != nil {
		b, err := os.ReadFile(binary)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	run := func(def string, args ...string) (int, string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(append([]string{"run"}, args...), "w.yaml")...)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + pathWithout("whimbrel-run"), "HOME=" + t.TempDir()}
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return ee.ExitCode(), b.String()
		case err != nil:
			t.Fatal(err)
		}
		return 0, b.String()
	}
	if code, out := run(superviseWorkflow); code != 0 || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("a plain workflow without whimbrel-run: exit %d, want 0 and COMPLETED\n%s", code, out)
	}
	code, out := run("name: wants-simple\nactivities:\n  simple: {env: {WHIMBREL_API: simple}, command: [\"true\"]}\n")
	if code != 1 {
		t.Fatalf("an activity asking for the Simple Lambda API without whimbrel-run: exit %d, want 1\n%s", code, out)
	}
	st := openStore(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{Name: "wants-simple"})
	if err != nil || len(wfs) != 1 {
		t.Fatalf("executions of wants-simple: %v %v", wfs, err)
	}
	a, err := st.GetActivity(ctx, state.ActivityKey{WorkflowExecID: wfs[0].WorkflowExecID, ActivityExecID: state.ActivityExecIDFor(wfs[0].WorkflowExecID, "simple")})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != state.Failed || !strings.Contains(a.Error, "--wrapper") || !strings.Contains(a.Error, "WHIMBREL_API=simple") {
		t.Errorf("the activity is %s (%q), want FAILED with an error naming WHIMBREL_API=simple and --wrapper", a.State, a.Error)
	}
	if code, out := run(superviseWorkflow, "--supervise", "process"); code != 2 || !strings.Contains(out, "--wrapper") {
		t.Errorf("--supervise process without whimbrel-run: exit %d, want 2 naming --wrapper\n%s", code, out)
	}
}
