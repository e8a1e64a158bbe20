//go:build docker && linux

package dockertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	dockerbackend "github.com/whimbrel/whimbrel/launcher/docker"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// e2e is a store, a directory mounted at /state in every container, and
// what a launcher and its containers need to reach the store.
type e2e struct {
	st       state.Store
	dir      string
	storeEnv map[string]string // the launcher's StoreEnv, as the containers see it
	defEnv   map[string]string // more environment for the containers
}

func newE2E(t *testing.T, embedded bool) *e2e {
	t.Helper()
	e := &e2e{dir: t.TempDir(), defEnv: map[string]string{}}
	if embedded {
		st, err := sqlite.Open(filepath.Join(e.dir, "state.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		e.st = st
		e.storeEnv = map[string]string{"WHIMBREL_STORE": "sqlite:/state/state.db"}
		return e
	}
	st := dynamotest.NewStore(t, dynamodb.Options{})
	e.st = st
	e.storeEnv = map[string]string{"WHIMBREL_STORE": "dynamodb", "WHIMBREL_TABLE_PREFIX": st.Prefix()}
	for _, kv := range dynamotest.Env(t, st.Prefix()) {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") {
			e.defEnv[k] = v
		}
	}
	return e
}

// start starts a workflow of the given activities (YAML lines under
// activities:), every one launched as a container of the test image.
func (e *e2e) start(t *testing.T, name, defaults, activities string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ndefaults:\n  heartbeat_interval: 1s\n  heartbeat_timeout: 4s\n", name)
	if !strings.Contains(defaults, "kill_grace:") {
		b.WriteString("  kill_grace: 2s\n")
	}
	b.WriteString(defaults)
	if len(e.defEnv) > 0 {
		b.WriteString("  env:\n")
		for k, v := range e.defEnv {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
	}
	fmt.Fprintf(&b, "  launch: {type: docker, image: %q, docker_args: [--network, host, --volume, %q]}\n", image, e.dir+":/state")
	b.WriteString("activities:\n")
	b.WriteString(activities)
	d, err := definition.Parse(name+".yaml", []byte(b.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, _, err := workflow.Start(ctx, e.st, d, workflow.StartOptions{Source: "dockertest"})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// countingDocker is the Docker backend, counting the launches that
// succeeded and keeping the jobs.
type countingDocker struct {
	dockerbackend.Backend
	ok   atomic.Int64
	mu   sync.Mutex
	jobs []launcher.Job
	errs []error
}

func (c *countingDocker) Launch(ctx context.Context, j launcher.Job) (string, error) {
	c.mu.Lock()
	c.jobs = append(c.jobs, j)
	c.mu.Unlock()
	id, err := c.Backend.Launch(ctx, j)
	if err == nil {
		c.ok.Add(1)
	} else {
		c.mu.Lock()
		c.errs = append(c.errs, err)
		c.mu.Unlock()
	}
	return id, err
}

// runLauncher runs a launcher with the Docker backend until the test ends.
func (e *e2e) runLauncher(t *testing.T, workflowID string) *countingDocker {
	t.Helper()
	backend := &countingDocker{}
	l := launcher.New(e.st, launcher.Config{
		Backends: map[string]launcher.Backend{definition.LaunchDocker: backend},
		Interval: 200 * time.Millisecond,
		StoreEnv: e.storeEnv,
		Workflow: workflowID,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return backend
}

func (e *e2e) activity(t *testing.T, wf, name string) *state.ActivityExec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := e.st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wf, name), WorkflowExecID: wf})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// waitActivity waits until cond holds for the activity, and returns it.
func (e *e2e) waitActivity(t *testing.T, wf, name string, timeout time.Duration, cond func(*state.ActivityExec) bool) *state.ActivityExec {
	t.Helper()
	var a *state.ActivityExec
	waitFor(t, timeout, name+" to reach the expected state", func() bool {
		a = e.activity(t, wf, name)
		return cond(a)
	})
	return a
}

func (e *e2e) waitSettled(t *testing.T, wf string, timeout time.Duration) *state.WorkflowExec {
	t.Helper()
	var w *state.WorkflowExec
	waitFor(t, timeout, "workflow "+wf+" to settle", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		w, err = e.st.GetWorkflow(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		return w.State.Terminal()
	})
	return w
}

func (e *e2e) lines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, file))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// running: the wrapper claimed it and the launcher recorded the container.
func running(a *state.ActivityExec) bool { return a.State == state.Running && a.LaunchedAs != "" }

func containerOf(t *testing.T, a *state.ActivityExec) string {
	t.Helper()
	id, ok := strings.CutPrefix(a.LaunchedAs, "container:")
	if !ok {
		t.Fatalf("%s launched as %q, not a container", a.ActivityName, a.LaunchedAs)
	}
	return id
}

// A DAG with fan-out and fan-in runs to COMPLETED through the Docker
// backend, on DynamoDB Local.
func TestDockerBackendDAG(t *testing.T) {
	t.Parallel()
	e := newE2E(t, false)
	step := `{command: [sh, -c, 'echo $WHIMBREL_ACTIVITY_NAME >> /state/order'], depends_on: [%s]}` + "\n"
	acts := "  a: {command: [sh, -c, 'echo a >> /state/order']}\n" +
		"  b: " + fmt.Sprintf(step, "a") + "  c: " + fmt.Sprintf(step, "a") + "  d: " + fmt.Sprintf(step, "b, c")
	wf := e.start(t, "dag", "", acts)
	e.runLauncher(t, wf)
	if w := e.waitSettled(t, wf, 2*time.Minute); w.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s (%s), want COMPLETED", w.State, w.Reason)
	}
	order := e.lines(t, "order")
	if len(order) != 4 || order[0] != "a" || order[3] != "d" {
		t.Errorf("ran in order %v, want a, then b and c, then d", order)
	}
}

// Exit codes 0/1/7/255 and deaths by signal are recorded with the stderr
// tail, on the embedded store mounted into the containers.
func TestDockerBackendExitCodes(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	tests := []struct {
		name   string
		script string
		code   int
		signal string
	}{
		{"e0", "echo fine >&2; exit 0", 0, ""},
		{"e1", "echo boom1 >&2; exit 1", 1, ""},
		{"e7", "echo boom7 >&2; exit 7", 7, ""},
		{"e255", "echo boom255 >&2; exit 255", 255, ""},
		{"usr1", "echo boomusr1 >&2; kill -USR1 $$", 138, "SIGUSR1"},
		{"kill", "echo boomkill >&2; kill -KILL $$", 137, "SIGKILL"},
	}
	var acts strings.Builder
	for _, tt := range tests {
		fmt.Fprintf(&acts, "  %s: {command: [sh, -c, '%s']}\n", tt.name, tt.script)
	}
	wf := e.start(t, "codes", "", acts.String())
	e.runLauncher(t, wf)
	e.waitSettled(t, wf, 2*time.Minute)
	for _, tt := range tests {
		a := e.waitActivity(t, wf, tt.name, time.Minute, func(a *state.ActivityExec) bool { return a.State.Terminal() })
		want := state.Failed
		if tt.code == 0 {
			want = state.Completed
		}
		tail := strings.Fields(tt.script)[1] // what it wrote to stderr
		if a.State != want || exitCode(a) != tt.code || a.Signal != tt.signal || !strings.Contains(a.Error, tail) {
			t.Errorf("%s: %s exit %d signal %q stderr %q; want %s %d %q with %q",
				tt.name, a.State, exitCode(a), a.Signal, a.Error, want, tt.code, tt.signal, tail)
		}
	}
}

// Cancelling the workflow stops a running container within about a
// heartbeat interval; the activity is CANCELLED_RUNNING with the exit.
func TestDockerBackendCancel(t *testing.T) {
	t.Parallel()
	e := newE2E(t, false)
	wf := e.start(t, "cancel", "", "  long: {command: [sleep, '300']}\n")
	e.runLauncher(t, wf)
	a := e.waitActivity(t, wf, "long", time.Minute, running)
	id := containerOf(t, a)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := workflow.Cancel(ctx, e.st, wf, "dockertest", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the container to exit", func() bool {
		out, err := docker(t, "ps", "--quiet", "--filter", "id="+id)
		return err == nil && out == ""
	})
	took := time.Since(began)
	t.Logf("container gone %v after the cancel (heartbeat interval 1s)", took)
	if took > 4*time.Second {
		t.Errorf("the container ran %v after the cancel, want about one heartbeat interval (1s)", took)
	}
	a = e.waitActivity(t, wf, "long", 20*time.Second, func(a *state.ActivityExec) bool { return a.ExitCode != nil })
	if a.State != state.CancelledRunning || a.Signal != "SIGTERM" {
		t.Errorf("long: %s signal %q, want CANCELLED_RUNNING, stopped by SIGTERM", a.State, a.Signal)
	}
}

// docker stop: SIGTERM reaches the whole process group of the command, and
// the outcome is recorded.
func TestDockerBackendStop(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	script := `sh -c "trap \"echo gc >> /state/term; exit 0\" TERM; while :; do sleep 0.1; done" & touch /state/ready; wait`
	wf := e.start(t, "stop", "", fmt.Sprintf("  s: {command: [sh, -c, '%s']}\n", script))
	e.runLauncher(t, wf)
	a := e.waitActivity(t, wf, "s", time.Minute, running)
	waitFor(t, 30*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(e.dir, "ready"))
		return err == nil
	})
	mustDocker(t, "stop", containerOf(t, a))
	a = e.waitActivity(t, wf, "s", 30*time.Second, func(a *state.ActivityExec) bool { return a.State.Terminal() })
	if a.State != state.Failed || exitCode(a) != 143 || a.Signal != "SIGTERM" {
		t.Errorf("s: %s exit %d signal %q, want FAILED 143 SIGTERM", a.State, exitCode(a), a.Signal)
	}
	if got := e.lines(t, "term"); len(got) != 1 {
		t.Errorf("the command's child got SIGTERM %d times, want 1: docker stop must reach the group", len(got))
	}
}

// Defect 6: the Docker backend gives each container a stop timeout above
// the kill grace, so docker stop on a command slow to exit lets the
// wrapper kill it and record the outcome before the engine kills the
// wrapper. Docker's own default (10 s) is below the grace here (11 s).
func TestDockerBackendStopTimeout(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	wf := e.start(t, "slowstop", "  kill_grace: 11s\n",
		`  slow: {command: [sh, -c, 'trap "" TERM; touch /state/ready; while :; do sleep 0.1; done']}`+"\n")
	e.runLauncher(t, wf)
	a := e.waitActivity(t, wf, "slow", time.Minute, running)
	id := containerOf(t, a)
	if got := mustDocker(t, "inspect", "--format", "{{.Config.StopTimeout}}", id); got != "21" {
		t.Errorf("stop timeout %s, want 21 (grace 11 s + %v)", got, dockerbackend.StopMargin)
	}
	waitFor(t, 30*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(e.dir, "ready"))
		return err == nil
	})
	mustDocker(t, "stop", id) // no --time: the container's own stop timeout
	a = e.waitActivity(t, wf, "slow", 40*time.Second, func(a *state.ActivityExec) bool { return a.State.Terminal() })
	if a.State != state.Failed || a.Signal != "SIGKILL" {
		t.Errorf("slow: %s signal %q (%s), want FAILED, killed by the wrapper after the grace", a.State, a.Signal, a.Reason)
	}
}

// The control for defect 6: with Docker's default stop timeout (10 s,
// given explicitly, which the backend respects), below the grace, the
// engine kills the wrapper first and the activity is left RUNNING.
func TestDockerBackendStopTimeoutControl(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	wf := e.start(t, "slowstop", "  kill_grace: 11s\n",
		`  slow: {command: [sh, -c, 'trap "" TERM; touch /state/ready; while :; do sleep 0.1; done'], `+
			`launch: {type: docker, image: "`+image+`", docker_args: [--network, host, --stop-timeout, "10", --volume, "`+e.dir+`:/state"]}}`+"\n")
	e.runLauncher(t, wf)
	a := e.waitActivity(t, wf, "slow", time.Minute, running)
	waitFor(t, 30*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(e.dir, "ready"))
		return err == nil
	})
	mustDocker(t, "stop", containerOf(t, a))
	time.Sleep(3 * time.Second)
	if a = e.activity(t, wf, "slow"); a.State != state.Running {
		t.Errorf("slow: %s; want RUNNING (the wrapper killed before it could record): the control no longer shows the defect", a.State)
	}
}

// docker kill leaves the activity RUNNING with nobody heartbeating; the
// monitor times it out.
func TestDockerBackendKill(t *testing.T) {
	t.Parallel()
	e := newE2E(t, false)
	wf := e.start(t, "kill", "", "  k: {command: [sleep, '300']}\n")
	e.runLauncher(t, wf)
	a := e.waitActivity(t, wf, "k", time.Minute, running)
	mustDocker(t, "kill", containerOf(t, a))
	if a = e.activity(t, wf, "k"); a.State != state.Running {
		t.Fatalf("k: %s right after docker kill, want still RUNNING", a.State)
	}
	m := monitor.New(e.st, monitor.Config{Workflow: wf})
	a = e.waitActivity(t, wf, "k", 30*time.Second, func(a *state.ActivityExec) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := m.Sweep(ctx); err != nil {
			t.Logf("sweep: %v", err)
		}
		return a.State != state.Running
	})
	if a.State != state.TimedOut {
		t.Errorf("k: %s, want TIMED_OUT", a.State)
	}
}

// A command that leaves orphans leaves no zombies: whimbrel-run, as PID 1,
// reaps them.
func TestDockerBackendReapsOrphans(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	script := `for i in 1 2 3 4 5; do (sleep 0.2 &); done; sleep 1.5; ` +
		`echo zombies=$(cat /proc/[0-9]*/stat 2>/dev/null | grep -c ") Z ") >&2`
	wf := e.start(t, "orphans", "", fmt.Sprintf("  o: {command: [sh, -c, '%s']}\n", script))
	e.runLauncher(t, wf)
	e.waitSettled(t, wf, time.Minute)
	if a := e.activity(t, wf, "o"); a.State != state.Completed || !strings.Contains(a.Error, "zombies=0") {
		t.Errorf("o: %s, stderr %q; want COMPLETED and zombies=0", a.State, a.Error)
	}
}

// lostAnswerDocker is the Docker backend whose first docker run's answer
// is lost: it starts the container, then, as a call cut off by its
// deadline, reports nothing but the deadline, and only once the container
// has run, exited and been removed (--rm), so that its name is free again.
// Later calls are plain docker runs.
type lostAnswerDocker struct {
	dockerbackend.Backend
	calls atomic.Int64
	mu    sync.Mutex
	first string // the first container's ID
	job   launcher.Job
	err   error
}

func (b *lostAnswerDocker) Launch(ctx context.Context, j launcher.Job) (string, error) {
	if b.calls.Add(1) > 1 {
		return b.Backend.Launch(ctx, j)
	}
	id, err := b.Backend.Launch(ctx, j)
	b.mu.Lock()
	b.first, b.job, b.err = strings.TrimPrefix(id, "container:"), j, err
	b.mu.Unlock()
	if err != nil {
		return "", err
	}
	for ctx.Err() == nil {
		out, err := exec.CommandContext(ctx, "docker", "ps", "--all", "--quiet", "--no-trunc", "--filter", "id="+strings.TrimPrefix(id, "container:")).Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			break // gone: the name is free
		}
		time.Sleep(200 * time.Millisecond)
	}
	<-ctx.Done() // the answer never comes
	return "", ctx.Err()
}

// A repeated launch of the same activity never starts a second container.
// While the first container lives, Docker refuses the name and the backend
// answers with the container that holds it. Once it is gone (--rm), the
// name is free and the backend alone would start a second container (whose
// wrapper would be refused the claim): the launcher, before repeating a
// launch whose answer was lost, reads the activity, finds its wrapper's
// claim, and records the launch instead of repeating it.
func TestDockerBackendRepeatedLaunch(t *testing.T) {
	t.Parallel()
	e := newE2E(t, true)
	// The command outlives several polls of a loaded store, so the test
	// sees it RUNNING before it completes.
	wf := e.start(t, "again", "", `  r: {command: [sh, -c, 'echo run >> /state/runs; sleep 6']}`+"\n")
	ectx, stopEvents := context.WithCancel(context.Background())
	defer stopEvents()
	// From a second before, so that a start between the subscription's
	// request and its taking effect is replayed, not missed: a fixed wait
	// for the subscription could end first on a loaded machine.
	watch := exec.CommandContext(ectx, "docker", "events", "--since", fmt.Sprint(time.Now().Add(-time.Second).Unix()),
		"--filter", "event=start", "--filter", "label=whimbrel.workflow_exec_id="+wf, "--format", "{{.ID}}")
	var events testbin.Buffer
	watch.Stdout = &events
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopEvents(); _ = watch.Wait() }()

	backend := &lostAnswerDocker{Backend: dockerbackend.Backend{Timeout: time.Nanosecond}}
	l := launcher.New(e.st, launcher.Config{
		Backends:    map[string]launcher.Backend{definition.LaunchDocker: backend},
		Interval:    200 * time.Millisecond,
		StoreEnv:    e.storeEnv,
		Workflow:    wf,
		CallTimeout: 40 * time.Second, // the first container runs and is removed within it
	})
	lctx, stopLauncher := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(lctx) }()
	defer func() { stopLauncher(); <-done }()

	// While the first container lives, a repeat is answered with it.
	var first string
	var job launcher.Job
	var err error
	waitFor(t, time.Minute, "the first docker run", func() bool {
		backend.mu.Lock()
		defer backend.mu.Unlock()
		first, job, err = backend.first, backend.job, backend.err
		return first != "" || err != nil
	})
	e.waitActivity(t, wf, "r", time.Minute, func(a *state.ActivityExec) bool { return a.State == state.Running })
	if err != nil || first == "" {
		t.Fatalf("the first docker run: %q, %v", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if id, err := backend.Backend.Launch(ctx, job); err != nil || id != "container:"+first {
		t.Errorf("a second launch while the first container runs: %q, %v; want the first container, container:%s", id, err, first)
	}

	// The first call is cut off after its container is gone: the launcher
	// records the launch from the wrapper's claim and does not repeat it.
	a := e.waitActivity(t, wf, "r", time.Minute, func(a *state.ActivityExec) bool { return a.LaunchedAs != "" })
	time.Sleep(3 * time.Second) // a repeated container, had there been one, would have started by now
	if !strings.Contains(a.LaunchedAs, "cut off") || !strings.Contains(a.LaunchedAs, "its wrapper claimed it") {
		t.Errorf("r launched as %q, want the lost answer noted with the wrapper's claim", a.LaunchedAs)
	}
	if n := backend.calls.Load(); n != 1 {
		t.Errorf("docker run was called %d times by the launcher, want once", n)
	}
	if started := strings.Fields(events.String()); len(started) != 1 {
		t.Errorf("%d containers started (%v), want 1", len(started), started)
	}
	if runs := e.lines(t, "runs"); len(runs) != 1 {
		t.Errorf("the command ran %d times, want once", len(runs))
	}
	if a := e.activity(t, wf, "r"); a.State != state.Completed {
		t.Errorf("r: %s, want COMPLETED", a.State)
	}
}

// Two launchers racing on many activities start one container each.
func TestDockerBackendTwoLaunchersRace(t *testing.T) {
	t.Parallel()
	const n = 50
	e := newE2E(t, false)
	var acts strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&acts, "  a%02d: {command: [sh, -c, 'echo $WHIMBREL_ACTIVITY_NAME >> /state/runs']}\n", i)
	}
	wf := e.start(t, "race", "", acts.String())
	// The engine's own count of containers started for this workflow, from
	// its event stream, followed live: the daemon keeps only its last 256
	// events for later queries.
	ectx, stopEvents := context.WithCancel(context.Background())
	defer stopEvents()
	// From a second before, so that a start between the subscription's
	// request and its taking effect is replayed, not missed: a fixed wait
	// for the subscription could end first on a loaded machine.
	watch := exec.CommandContext(ectx, "docker", "events", "--since", fmt.Sprint(time.Now().Add(-time.Second).Unix()),
		"--filter", "event=start", "--filter", "label=whimbrel.workflow_exec_id="+wf, "--format", "{{.ID}}")
	var events testbin.Buffer
	watch.Stdout = &events
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopEvents(); _ = watch.Wait() }()
	began := time.Now()
	b1, b2 := e.runLauncher(t, wf), e.runLauncher(t, wf)
	if w := e.waitSettled(t, wf, 4*time.Minute); w.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s (%s), want COMPLETED", w.State, w.Reason)
	}
	took := time.Since(began).Round(time.Millisecond)
	time.Sleep(time.Second) // the last events reach the stream
	started := len(strings.Fields(events.String()))
	t.Logf("%d activities: %d containers started in %v; docker run succeeded %d times for launcher 1, %d for launcher 2",
		n, started, took, b1.ok.Load(), b2.ok.Load())
	for _, b := range []*countingDocker{b1, b2} {
		for _, err := range b.errs {
			t.Logf("a docker run reported an error: %v", err)
		}
	}
	if started != n {
		t.Errorf("%d containers started, want %d", started, n)
	}
	runs := e.lines(t, "runs")
	sort.Strings(runs)
	uniq := map[string]bool{}
	for _, r := range runs {
		uniq[r] = true
	}
	if len(runs) != n || len(uniq) != n {
		t.Errorf("commands ran %d times for %d activities, want %d once each", len(runs), len(uniq), n)
	}
}
