package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// leanTag builds whimbrel-run without the embedded store, as the
// container image does.
const leanTag = "whimbrel_nosqlite"

// TestLeanBuildLinksNoSQLite: with the tag, the wrapper links no SQLite
// driver (nor database/sql); without it, it links both stores.
func TestLeanBuildLinksNoSQLite(t *testing.T) {
	t.Parallel()
	deps := func(tags ...string) string {
		out, err := exec.Command("go", append(append([]string{"list"}, tags...), "-deps", ".")...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", tags, err)
		}
		return string(out)
	}
	sqlitePkgs := []string{"modernc.org/sqlite\n", "github.com/whimbrel/whimbrel/state/sqlite\n", "database/sql\n"}
	lean, full := deps("-tags", leanTag), deps()
	for _, p := range sqlitePkgs {
		if strings.Contains(lean, p) {
			t.Errorf("the lean build links %s", strings.TrimSpace(p))
		}
		if !strings.Contains(full, p) {
			t.Errorf("the full build does not link %s", strings.TrimSpace(p))
		}
	}
}

// TestLeanBuildSaysWhatItLacks: the lean wrapper (built as the container
// image builds it, see containerBuild), asked for the embedded
// store, exits 125 saying that this build lacks it and what to use, and
// creates nothing; --version names the stores of each build; on DynamoDB,
// behind the fault proxy (throttles, 500s, writes answered 500 after they
// landed), it runs its activity to COMPLETED as the full build does.
func TestLeanBuildSaysWhatItLacks(t *testing.T) {
	t.Parallel()
	lean := containerBuild(t)
	for bin, want := range map[string]string{lean: "no embedded store", binary: "stores: dynamodb, sqlite"} {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("%s --version: %v %q, want %q in it", bin, err, out, want)
		}
	}

	f := newFixture(t, storetest.DAG{"a": nil, "b": nil})
	f.queue(t, "a")
	db := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(lean, "--store", "sqlite:"+db, "--", "true")
	cmd.Env = f.env(t, "a")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != state.ExitWrapperError {
		t.Fatalf("the lean wrapper on sqlite: %v, want exit %d\n%s", err, state.ExitWrapperError, out)
	}
	for _, want := range []string{"built without the embedded store", leanTag, "--store dynamodb", "whimbrel-run-full"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the lean wrapper's error lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the lean wrapper made %s (stat: %v)", db, err)
	}
	if a := f.get(t, "a"); a.State != state.Queued {
		t.Errorf("a is %s after the refused run, want QUEUED", a.State)
	}

	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.2, Errors: 0.2, AfterWrite: 0.5})
	w := &runningWrapper{cmd: exec.Command(lean, "--", "sh", "-c", "echo ran"), done: make(chan struct{})}
	w.cmd.Env = f.env(t, "a", "AWS_ENDPOINT_URL_DYNAMODB="+proxy.Endpoint)
	w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
	if err := w.cmd.Run(); err != nil {
		t.Fatalf("the lean wrapper on DynamoDB: %v\n%s", err, w.stderr.String())
	}
	if w.stdout.String() != "ran\n" {
		t.Errorf("stdout %q, want the command's %q", w.stdout.String(), "ran\n")
	}
	deadline := time.Now().Add(30 * time.Second)
	for f.get(t, "a").State != state.Completed && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if a := f.get(t, "a"); a.State != state.Completed {
		t.Errorf("a is %s after the lean wrapper's run, want COMPLETED\n%s", a.State, w.stderr.String())
	}
}
