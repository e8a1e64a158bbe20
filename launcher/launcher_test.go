package launcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

var wrapper string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		wrapper = filepath.Join(dir, "whimbrel-run")
		return m.Run()
	}, nil, map[string]string{"whimbrel-run": "../cmd/whimbrel-run"})
}

// waitSettled waits until the workflow is terminal and returns it.
func waitSettled(tb testing.TB, st state.Store, id string, timeout time.Duration) *state.WorkflowExec {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		wf, err := st.GetWorkflow(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		if wf.State.Terminal() {
			return wf
		}
		if time.Now().After(deadline) {
			tb.Fatalf("workflow %s still %s after %s", id, wf.State, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func start(t *testing.T, st state.Store, yaml string) (string, *workflow.Definition) {
	t.Helper()
	d, err := workflow.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(testbin.Context(t), st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return id, d
}

// counting records every launch it sees.
type counting struct {
	mu       sync.Mutex
	launches map[state.ActivityKey]int
	jobs     []launcher.Job
	err      error
	block    chan struct{} // when set, Launch waits for it
}

func (c *counting) Launch(ctx context.Context, j launcher.Job) (string, error) {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launches == nil {
		c.launches = map[state.ActivityKey]int{}
	}
	c.launches[j.Key]++
	c.jobs = append(c.jobs, j)
	if c.err != nil {
		return "", c.err
	}
	return "test:" + j.ActivityName, nil
}

func manyActivities(name string, n int, dependOn string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nactivities:\n", name)
	if dependOn != "" {
		fmt.Fprintf(&b, "  %s: {command: [\"true\"]}\n", dependOn)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  a%04d: {command: [\"true\"]", i)
		if dependOn != "" {
			fmt.Fprintf(&b, ", depends_on: [%s]", dependOn)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// TestEightLaunchersLaunchEachOnce: 1,000 launchable activities, half
// readied by their start (they wait on nothing) and half by an advance, and
// 8 launchers at once: the backend sees each exactly once, and every item
// records it.
func TestEightLaunchersLaunchEachOnce(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	idA, _ := start(t, st, manyActivities("requested", 500, ""))
	idB, _ := start(t, st, manyActivities("readied", 500, "root"))
	// Complete root by hand and advance: its 500 dependents become READY.
	rootKey := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(idB, "root"), WorkflowExecID: idB}
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Ready}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: storetest.Claim("o")},
		{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"},
	} {
		if _, err := st.UpdateActivity(testbin.Context(t), rootKey, c); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := st.GetActivity(testbin.Context(t), rootKey)
	if res, err := workflow.Advance(testbin.Context(t), st, root, nil); err != nil || len(res.Readied) != 500 {
		t.Fatalf("advance: %d readied, %v", len(res.Readied), err)
	}

	backend := &counting{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 3; { // until three passes in a row find nothing
				n, err := l.Once(testbin.Context(t))
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					idle++
				} else {
					idle = 0
				}
			}
		}()
	}
	wg.Wait()

	if len(backend.launches) != 1000 {
		t.Errorf("the backend saw %d activities, want 1000", len(backend.launches))
	}
	for k, n := range backend.launches {
		if n != 1 {
			t.Errorf("%s launched %d times", k.ActivityExecID, n)
		}
	}
	for _, id := range []string{idA, idB} {
		acts, err := st.Activities(testbin.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			if a.ActivityName == "root" {
				continue
			}
			if a.State != state.Queued || a.LaunchedAs != "test:"+a.ActivityName || backend.launches[a.ActivityKey] != 1 {
				t.Errorf("%s: %s launched as %q, seen %d times", a.ActivityName, a.State, a.LaunchedAs, backend.launches[a.ActivityKey])
			}
		}
	}
}

// TestDAGRunsToCompletion runs a 50-activity DAG with fan-out and fan-in on
// the local backend: real whimbrel-run processes.
func TestDAGRunsToCompletion(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	var b strings.Builder
	b.WriteString("name: fan\ndefaults: {heartbeat_interval: 1s, heartbeat_timeout: 5s}\nactivities:\n  start: {command: [\"true\"]}\n")
	for i := 0; i < 24; i++ { // fan out
		fmt.Fprintf(&b, "  mid%02d: {command: [sh, -c, 'echo mid%02d'], depends_on: [start]}\n", i, i)
	}
	for i := 0; i < 24; i++ { // pairwise fan in
		fmt.Fprintf(&b, "  pair%02d: {command: [\"true\"], depends_on: [mid%02d, mid%02d]}\n", i, i, (i+1)%24)
	}
	b.WriteString("  join:\n    command: [\"true\"]\n    depends_on: [")
	for i := 0; i < 24; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "pair%02d", i)
	}
	b.WriteString("]\n")
	id, d := start(t, st, b.String())
	if len(d.Activities) != 50 {
		t.Fatalf("%d activities, want 50", len(d.Activities))
	}

	nl, err := nudge.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	local := &launcher.Local{Wrapper: wrapper, LogDir: t.TempDir(),
		Env: append(dynamotest.Env(t, st.Prefix()), "PATH="+os.Getenv("PATH"), nudge.Env+"="+nl.Addr())}
	l := launcher.New(st, launcher.Config{
		Backends: map[string]launcher.Backend{workflow.LaunchLocal: local},
		Interval: 200 * time.Millisecond, Nudge: nl.C(),
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()},
	})
	ctx, cancel := context.WithCancel(testbin.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		local.Wait()
	}()

	if wf := waitSettled(t, st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.State != state.Completed || !strings.HasPrefix(a.LaunchedAs, "pid:") || a.ExitCode == nil || *a.ExitCode != 0 {
			t.Errorf("%s: %s launched as %q exit %v", a.ActivityName, a.State, a.LaunchedAs, a.ExitCode)
		}
	}
}

// ecsStandIn is a local HTTP server answering RunTask as ECS would, and
// recording the requests.
type ecsStandIn struct {
	mu       sync.Mutex
	requests []map[string]any
	fail     string
}

func (s *ecsStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if got := r.Header.Get("X-Amz-Target"); got != "AmazonEC2ContainerServiceV20141113.RunTask" {
		http.Error(w, "unexpected target "+got, http.StatusBadRequest)
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	fail := s.fail
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if fail != "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"__type":"ClientException","message":%q}`, fail)
		return
	}
	fmt.Fprintf(w, `{"tasks":[{"taskArn":"arn:aws:ecs:eu-west-1:123456789012:task/batch/%s"}],"failures":[]}`, req["clientToken"])
}

const ecsWorkflow = `
name: ecs-wf
activities:
  extract:
    command: [python, extract.py]
    launch:
      type: ecs
      cluster: batch
      task_definition: etl:3
      container: main
      launch_type: FARGATE
      subnets: [subnet-1, subnet-2]
      security_groups: [sg-1]
  load:
    depends_on: [extract]
    command: ["true"]
`

// TestECSBackend points the real SDK client, through AWS_ENDPOINT_URL_ECS, at
// a stand-in server.
func TestECSBackend(t *testing.T) {
	srv := &ecsStandIn{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	t.Setenv("AWS_ENDPOINT_URL_ECS", ts.URL)
	t.Setenv("AWS_REGION", "eu-west-1")
	cfg, err := config.LoadDefaultConfig(testbin.Context(t), config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("k", "s", "")),
		config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	backend := &launcher.ECS{API: ecs.NewFromConfig(cfg)}
	st := dynamotest.NewStore(t, dynamodb.Options{})
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchECS: backend},
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()}})

	id, _ := start(t, st, ecsWorkflow)
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d, %v", n, err)
	}
	if len(srv.requests) != 1 {
		t.Fatalf("%d RunTask requests, want 1", len(srv.requests))
	}
	req := srv.requests[0]
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "extract"), WorkflowExecID: id}
	if req["cluster"] != "batch" || req["taskDefinition"] != "etl:3" || req["launchType"] != "FARGATE" || req["clientToken"] == "" {
		t.Errorf("request: %v", req)
	}
	overrides := req["overrides"].(map[string]any)["containerOverrides"].([]any)[0].(map[string]any)
	env := map[string]string{}
	for _, e := range overrides["environment"].([]any) {
		kv := e.(map[string]any)
		env[kv["name"].(string)] = kv["value"].(string)
	}
	if overrides["name"] != "main" || env["WHIMBREL_ACTIVITY_EXEC_ID"] != key.ActivityExecID || env["WHIMBREL_WORKFLOW_EXEC_ID"] != id ||
		env["WHIMBREL_TABLE_PREFIX"] != st.Prefix() || fmt.Sprint(overrides["command"]) != "[python extract.py]" {
		t.Errorf("container override: %v", overrides)
	}
	net := req["networkConfiguration"].(map[string]any)["awsvpcConfiguration"].(map[string]any)
	if fmt.Sprint(net["subnets"]) != "[subnet-1 subnet-2]" || net["assignPublicIp"] != "DISABLED" {
		t.Errorf("network: %v", net)
	}
	a, err := st.GetActivity(testbin.Context(t), key)
	if err != nil || a.State != state.Queued || !strings.HasSuffix(a.LaunchedAs, "/"+req["clientToken"].(string)) {
		t.Errorf("activity after launch: %+v, %v", a, err)
	}

	// The client token is the same for the same launch: a repeat cannot
	// start a second task.
	job := launcher.Job{Key: key, ActivityName: "extract", Settings: workflow.Settings{Launch: &workflow.Launch{Type: "ecs", TaskDefinition: "etl:3", Container: "main"}}}
	for i := 0; i < 2; i++ {
		if _, err := backend.Launch(testbin.Context(t), job); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := srv.requests[1]["clientToken"], srv.requests[2]["clientToken"]; a != b || a != req["clientToken"] {
		t.Errorf("client tokens %v, %v, %v differ", req["clientToken"], a, b)
	}

	// A failed RunTask ends the activity FAILED with ECS's answer, and the
	// workflow with it.
	srv.fail = "No Container Instances were found in your cluster."
	id2, _ := start(t, st, ecsWorkflow)
	if _, err := l.Once(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	failed, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id2, "extract"), WorkflowExecID: id2})
	if err != nil || failed.State != state.Failed || !strings.Contains(failed.Error, "No Container Instances") ||
		!strings.HasPrefix(failed.Reason, "launch failed") {
		t.Errorf("after a failed RunTask: %+v, %v", failed, err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), id2)
	if err != nil || wf.State != state.WorkflowFailed {
		t.Errorf("workflow after a failed launch: %+v, %v", wf, err)
	}
}

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
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchDocker: &launcher.Docker{Binary: fake}}})
	id, _ := start(t, st, "name: d\nactivities:\n  a:\n    command: [./etl.sh, nightly]\n    launch: {type: docker, image: 'etl:9', docker_args: [--network, host]}\n")
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
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
	if a, err := st.GetActivity(testbin.Context(t), key); err != nil || a.LaunchedAs != "container:4f2c9e1d8b7a" {
		t.Errorf("activity: %+v %v", a, err)
	}

	id2, _ := start(t, st, "name: d\nactivities:\n  a:\n    launch: {type: docker, image: 'etl:missing'}\n")
	if _, err := l.Once(testbin.Context(t)); err != nil {
		t.Fatal(err)
	}
	a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id2, "a"), WorkflowExecID: id2})
	if err != nil || a.State != state.Failed || !strings.Contains(a.Error, "Unable to find image") {
		t.Errorf("failed docker run: %+v %v", a, err)
	}
}

func TestMaxRunning(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, manyActivities("capped", 5, ""))
	backend := &counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}, MaxRunning: 2})
	if n, err := l.Once(testbin.Context(t)); n != 2 || err != nil {
		t.Fatalf("first pass launched %d (%v), want the cap of 2", n, err)
	}
	if n, _ := l.Once(testbin.Context(t)); n != 0 {
		t.Fatalf("second pass launched %d while 2 run, want 0", n)
	}
	// One of them ends: room for one more.
	for k := range backend.launches {
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: storetest.Claim("o")},
			{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"},
		} {
			if _, err := st.UpdateActivity(testbin.Context(t), k, c); err != nil {
				t.Fatal(err)
			}
		}
		break
	}
	if n, _ := l.Once(testbin.Context(t)); n != 1 {
		t.Errorf("after one ended, launched %d, want 1", n)
	}
	_ = id
}

// TestDrainFinishesClaimedLaunches: a launch under way when the launcher is
// told to stop is carried out and recorded.
func TestDrainFinishesClaimedLaunches(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, manyActivities("drain", 3, ""))
	backend := &counting{block: make(chan struct{})}
	// One worker: the other two are not claimed before the stop.
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}, Workers: 1})
	ctx, cancel := context.WithCancel(testbin.Context(t))
	done := make(chan int, 1)
	go func() {
		n, _ := l.Once(ctx)
		done <- n
	}()
	// Wait for the first claim, then stop the launcher mid-launch.
	deadline := time.Now().Add(20 * time.Second)
	for {
		acts, err := st.Activities(testbin.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		queued := 0
		for _, a := range acts {
			if a.State == state.Queued {
				queued++
			}
		}
		if queued > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing was claimed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	close(backend.block)
	n := <-done
	if n != 1 {
		t.Errorf("launched %d after the stop, want the 1 in flight", n)
	}
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		switch {
		case a.State == state.Queued && a.LaunchedAs == "":
			t.Errorf("%s left QUEUED without a launch record", a.ActivityName)
		case a.State != state.Queued && a.State != state.Ready:
			t.Errorf("%s is %s", a.ActivityName, a.State)
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) == false {
		t.Error("the context was not cancelled")
	}
}

// lostAnswer lands the first claim to QUEUED but loses its answer.
type lostAnswer struct {
	launcher.Store
	once sync.Once
}

func (l *lostAnswer) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	a, err := l.Store.UpdateActivity(ctx, k, c)
	lost := false
	if err == nil && c.To == state.Queued {
		l.once.Do(func() { lost = true })
	}
	if lost {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return a, err
}

// TestClaimWhoseAnswerWasLostIsLaunched: the claim's token tells the
// launcher that the move it cannot see was its own.
func TestClaimWhoseAnswerWasLostIsLaunched(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	start(t, st, manyActivities("lost", 1, ""))
	backend := &counting{}
	l := launcher.New(&lostAnswer{Store: st}, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}})
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil || len(backend.launches) != 1 {
		t.Errorf("launched %d (%v), backend saw %d; want the claimed activity launched", n, err, len(backend.launches))
	}
}

// TestWorkflowWithoutDefinition: a workflow started by another client has
// no definition here; its activities are left alone, and the launcher goes
// on.
func TestWorkflowWithoutDefinition(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": nil, "c": nil})
	w.Exec.Definition = ""
	storetest.Create(t, st, w)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := st.UpdateActivity(testbin.Context(t), storetest.Key(w, n), state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Ready}); err != nil {
			t.Fatal(err)
		}
	}
	start(t, st, manyActivities("ours", 1, ""))
	backend := &counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}})
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
		t.Errorf("launched %d (%v), want only the activity with a definition", n, err)
	}
}

// TestWrapperThatNeverClaims: a local wrapper that exits before claiming
// its activity fails it at once, with why, instead of leaving it QUEUED
// until the queued timeout.
func TestWrapperThatNeverClaims(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n")
	broken := filepath.Join(t.TempDir(), "whimbrel-run")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'cannot reach the store' >&2\nexit 125\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := &launcher.Local{Wrapper: broken, LogDir: t.TempDir()}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: local}})
	local.Exited = func(j launcher.Job, status string) { l.Exited(context.Background(), j, status) }
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d %v", n, err)
	}
	local.Wait()
	a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
	if err != nil || a.State != state.Failed || !strings.Contains(a.Reason, "exit status 125") || !strings.Contains(a.Reason, "before claiming") {
		t.Errorf("activity: %+v %v", a, err)
	}
	if wf := waitSettled(t, st, id, 10*time.Second); wf.State != state.WorkflowFailed {
		t.Errorf("workflow %s, want FAILED", wf.State)
	}
}

// TestWrapperExitedZeroIsNotFailed: whimbrel-run exits 0 only after its
// claim, so an exit 0 costs no write: the activity is left as the wrapper
// left it (here, a stand-in that claims nothing: still QUEUED, for the
// monitor's queued timeout).
func TestWrapperExitedZeroIsNotFailed(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"]}\n")
	quiet := filepath.Join(t.TempDir(), "whimbrel-run")
	if err := os.WriteFile(quiet, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	local := &launcher.Local{Wrapper: quiet, LogDir: t.TempDir()}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: local}})
	exited := make(chan string, 1)
	local.Exited = func(j launcher.Job, status string) {
		l.Exited(context.Background(), j, status)
		exited <- status
	}
	if n, err := l.Once(testbin.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d %v", n, err)
	}
	local.Wait()
	if s := <-exited; s != "exit status 0" {
		t.Fatalf("status %q, want exit status 0", s)
	}
	a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
	if err != nil || a.State != state.Queued {
		t.Errorf("activity: %+v %v, want QUEUED", a, err)
	}
}

// TestMaxRunningRefillsWhenAChildExits: under a cap, a local activity's
// slot is free as soon as its wrapper exits, and the launcher starts the
// next at once. The poll interval here is an hour, and no wrapper readies
// anything (no nudge): only the exits can drive the 5 activities through a
// cap of 1.
func TestMaxRunningRefillsWhenAChildExits(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, manyActivities("refill", 5, ""))
	local := &launcher.Local{Wrapper: wrapper, LogDir: t.TempDir(),
		Env: append(dynamotest.Env(t, st.Prefix()), "PATH="+os.Getenv("PATH"))}
	l, _ := launcher.NewWithLocal(st, launcher.Config{Interval: time.Hour, MaxRunning: 1,
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()}}, local, nil)
	ctx, cancel := context.WithCancel(testbin.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		local.Wait()
	}()
	if wf := waitSettled(t, st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
}
