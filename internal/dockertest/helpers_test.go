//go:build docker && linux

package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// dockerTimeout bounds one docker CLI call.
const dockerTimeout = time.Minute

// docker runs the docker CLI and returns its trimmed stdout; stderr is in
// the error.
func docker(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(out.String()), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// mustDocker is docker that fails the test on error.
func mustDocker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := docker(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// container is one detached container, removed when the test ends.
type container struct{ id string }

// runDetached starts a container with docker run --detach (and
// --network host) and the given arguments.
func runDetached(t testing.TB, args ...string) *container {
	t.Helper()
	id := mustDocker(t, append([]string{"run", "--detach", "--network", "host"}, args...)...)
	t.Cleanup(func() { _, _ = docker(t, "rm", "--force", id) })
	return &container{id: id}
}

// wait waits for the container to exit and returns its exit code.
func (c *container) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "wait", c.id).Output()
	if err != nil {
		t.Fatalf("docker wait %s: %v (not exited within %v?)\nlogs:\n%s", c.id, err, timeout, c.logs(t))
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("docker wait printed %q", out)
	}
	return code
}

// logs returns the container's stdout and stderr, each in full.
func (c *container) logs(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "docker", "logs", c.id).CombinedOutput()
	return string(out)
}

// running reports whether the container is running.
func (c *container) running(t testing.TB) bool {
	t.Helper()
	out, err := docker(t, "inspect", "--format", "{{.State.Running}}", c.id)
	return err == nil && out == "true"
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fixture is a store holding one RUNNING workflow whose activities (all
// independent) are QUEUED, as a launcher leaves them, and what a container
// needs to reach it.
type fixture struct {
	st    state.Store
	w     *state.NewWorkflow
	store []string // docker run arguments that reach the store
	dir   string   // a directory mounted at /state, shared with the container
}

// newSQLite makes a fixture on the embedded store, in a file mounted into
// the containers.
func newSQLite(t testing.TB, names ...string) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	f := &fixture{st: st, dir: dir, store: []string{"--volume", dir + ":/state", "--env", "WHIMBREL_STORE=sqlite:/state/state.db"}}
	f.create(t, names)
	return f
}

// newDynamo makes a fixture on DynamoDB Local, reached at endpoint (the
// emulator's, or a proxy's) over the host's loopback.
func newDynamo(t testing.TB, endpoint func(*dynamodb.Store) string, names ...string) *fixture {
	t.Helper()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	f := &fixture{st: st, dir: t.TempDir()}
	f.store = []string{"--volume", f.dir + ":/state"}
	for _, kv := range dynamotest.Env(t, st.Prefix()) {
		if strings.HasPrefix(kv, "AWS_ENDPOINT_URL_DYNAMODB=") && endpoint != nil {
			kv = "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint(st)
		}
		f.store = append(f.store, "--env", kv)
	}
	f.create(t, names)
	return f
}

func (f *fixture) create(t testing.TB, names []string) {
	t.Helper()
	dag := storetest.DAG{}
	for _, n := range names {
		dag[n] = nil
	}
	f.w = storetest.NewWorkflow(t, "wf", dag)
	storetest.Create(t, f.st, f.w)
	for _, n := range names {
		if _, err := f.st.UpdateActivity(context.Background(), f.key(n), state.ActivityChange{
			From: []state.ActivityState{state.Requested, state.Ready}, To: state.Queued,
		}); err != nil {
			t.Fatalf("queue %s: %v", n, err)
		}
	}
}

func (f *fixture) key(name string) state.ActivityKey { return storetest.Key(f.w, name) }

// args are the docker run arguments that make a container's whimbrel-run
// run the named activity.
func (f *fixture) args(name string) []string {
	k := f.key(name)
	return append(append([]string(nil), f.store...),
		"--env", "WHIMBREL_ACTIVITY_EXEC_ID="+k.ActivityExecID,
		"--env", "WHIMBREL_WORKFLOW_EXEC_ID="+k.WorkflowExecID)
}

func (f *fixture) get(t testing.TB, name string) *state.ActivityExec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := f.st.GetActivity(ctx, f.key(name))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitState waits until the activity is in state and returns it.
func (f *fixture) waitState(t testing.TB, name string, want state.ActivityState, timeout time.Duration) *state.ActivityExec {
	t.Helper()
	var a *state.ActivityExec
	deadline := time.Now().Add(timeout)
	for {
		a = f.get(t, name)
		if a.State == want {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s after %v, want %s (reason %q)", name, a.State, timeout, want, a.Reason)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFile waits until the file exists in the fixture's shared directory.
func (f *fixture) waitFile(t testing.TB, name string, timeout time.Duration) string {
	t.Helper()
	path := filepath.Join(f.dir, name)
	var b []byte
	waitFor(t, timeout, "file "+name, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	return string(b)
}

func exitCode(a *state.ActivityExec) int {
	if a.ExitCode == nil {
		return -1
	}
	return *a.ExitCode
}
