package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

var bin string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		bin = dir
		return m.Run()
	}, nil, map[string]string{
		"whimbrel-poller":   ".",
		"whimbrel-launcher": "../whimbrel-launcher",
		"whimbrel-run":      "../whimbrel-run",
		"whimbrel":          "../whimbrel",
	})
}

// The activities pass data through the Simple Lambda API too: the
// request's params, first's progress (on heartbeat events) and output
// (on its COMPLETED event), which second reads through a template.
const definition = `name: e2e-simple
params:
  base: {default: "1"}
defaults:
  heartbeat_interval: 1s
  heartbeat_timeout: 5s
activities:
  first:
    command:
      - sh
      - -c
      - |
        echo one
        echo '{"step": 1}' > "$WHIMBREL_PROGRESS"
        sleep 1.5
        echo '{"n": 41}' > "$WHIMBREL_OUTPUT"
  second:
    depends_on: [first]
    command:
      - sh
      - -c
      - |
        sleep 2; echo two
        echo "{\"sum\": $(( {{ outputs.first.n }} + {{ params.base }} ))}" > "$WHIMBREL_OUTPUT"
`

func run(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// daemon starts a long-running binary, stopped with SIGTERM when the test
// ends; its output goes to the test log if the test fails.
func daemon(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("%s did not stop on SIGTERM", name)
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
}

// TestRequestInsertedWithTheSDKRunsToCompletion: a workflow started only by
// an item a foreign client inserted runs to COMPLETED, with the poller
// applying the request and the wrappers' events (whimbrel-run --api simple).
func TestRequestInsertedWithTheSDKRunsToCompletion(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	file := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(file, []byte(definition), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := run(t, env, "whimbrel", "register", file); code != 0 || !strings.Contains(out, "registered e2e-simple (2 activities)") {
		t.Fatalf("register: exit %d\n%s", code, out)
	}
	daemon(t, env, "whimbrel-poller", "--poll-interval", "50ms", "--discovery", "1s", "--order-window", "2s")
	daemon(t, append(env, "WHIMBREL_API=simple"), "whimbrel-launcher", "--interval", "200ms")

	// The request, inserted with the SDK, as any client might.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reqID := "e2e-simple::" + uuid.NewString()
	now := time.Now().UTC()
	num := func(v int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }
	if _, err := dynamotest.Client(t).PutItem(ctx, &awsdynamodb.PutItemInput{
		TableName: aws.String(st.Prefix() + "workflow_request"),
		Item: map[string]types.AttributeValue{
			"workflow_request_id": &types.AttributeValueMemberS{Value: reqID},
			"workflow_name":       &types.AttributeValueMemberS{Value: "e2e-simple"},
			"when": &types.AttributeValueMemberL{Value: []types.AttributeValue{num(now.Year()), num(int(now.Month())), num(now.Day()),
				num(now.Hour()), num(now.Minute()), num(now.Second())}},
			"when_epoch": num(int(now.Unix())),
			"source":     &types.AttributeValueMemberS{Value: "the SDK, in a test"},
			"params":     &types.AttributeValueMemberS{Value: `{"base": "2"}`},
		},
	}); err != nil {
		t.Fatal(err)
	}

	id := state.WorkflowExecIDForRequest("e2e-simple", reqID)
	deadline := time.Now().Add(90 * time.Second)
	var wf *state.WorkflowExec
	for {
		var err error
		wf, err = st.GetWorkflow(ctx, id)
		if err == nil && wf.State.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s: %+v, %v; want COMPLETED", id, wf, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s (%s), want COMPLETED", id, wf.State, wf.Reason)
	}
	acts, err := st.Activities(ctx, id)
	if err != nil || len(acts) != 2 {
		t.Fatal(acts, err)
	}
	for _, a := range acts {
		if a.State != state.Completed || a.Attempt != 1 || a.ExitCode == nil || *a.ExitCode != 0 || a.EventCursor == "" {
			t.Errorf("activity %s: %+v, want COMPLETED through its events, once", a.ActivityName, a)
		}
		events, err := dynamoinbox.New(st).Events(ctx, a.ActivityExecID, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		applied := map[string]bool{}
		for _, e := range events {
			if e.Outcome.Result == state.OutcomeApplied {
				applied[e.Transition] = true
			}
		}
		if !applied["RUNNING"] || !applied["COMPLETED"] {
			t.Errorf("activity %s: events %+v, want its RUNNING and COMPLETED events applied", a.ActivityName, events)
		}
	}
	if first, second := acts[0], acts[1]; first.Output != `{"n":41}` || first.Progress != `{"step": 1}` || second.Output != `{"sum":43}` {
		t.Errorf("outputs %q, %q and first's progress %q: want {\"n\":41}, {\"sum\":43} (41 + the request's base 2) and {\"step\": 1}",
			first.Output, second.Output, first.Progress)
	}
	req, err := st.GetRequest(ctx, reqID, "e2e-simple")
	if err != nil || req.Outcome.Result != state.OutcomeStarted || req.WorkflowExecID != id {
		t.Errorf("request: %+v, %v", req, err)
	}

	// whimbrel request does the same through Whimbrel's own client.
	out, code := run(t, env, "whimbrel", "request", "--wait", "--wait-interval", "200ms", "e2e-simple")
	if code != 0 || !strings.Contains(out, "COMPLETED") {
		t.Errorf("whimbrel request --wait: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "whimbrel", "request", "nobody")
	if code != 1 || !strings.Contains(out, "whimbrel register") {
		t.Errorf("request of an unregistered workflow: exit %d\n%s", code, out)
	}
	out, code = run(t, env, "whimbrel", "registered")
	if code != 0 || !strings.Contains(out, "e2e-simple") || !strings.Contains(out, "any processor") {
		t.Errorf("registered: exit %d\n%s", code, out)
	}
}

func TestRefusesAStoreWithoutStreams(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, code := run(t, []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(dir, "s.db")}, "whimbrel-poller")
	if code != 2 || !strings.Contains(out, "--store dynamodb") {
		t.Errorf("poller on sqlite: exit %d\n%s", code, out)
	}
	// A request on the embedded store is for whimbrel up, which processes
	// it without streams; a store not installed says how to install it.
	out, code = run(t, []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(dir, "s.db")}, "whimbrel", "request", "etl")
	if code != 3 || !strings.Contains(out, "whimbrel install") {
		t.Errorf("request on an embedded store not installed: exit %d\n%s", code, out)
	}
}

// TestSimpleWrapperIsStoppedByCancellation: a wrapper that only writes
// events still learns of a cancellation from its heartbeats, stops its
// command, and its outcome is recorded beside the final state.
func TestSimpleWrapperIsStoppedByCancellation(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	file := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(file, []byte("name: long\nactivities:\n  sleeper:\n    command: [sleep, \"60\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, env, "whimbrel", "start", file)
	if code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	id := strings.TrimSpace(out)
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "sleeper"), WorkflowExecID: id}
	daemon(t, env, "whimbrel-poller", "--poll-interval", "50ms", "--discovery", "1s")

	wrapper := exec.Command(filepath.Join(bin, "whimbrel-run"), "--api", "simple", "--heartbeat-interval", "500ms",
		"--heartbeat-timeout", "5s", "--kill-grace", "2s", "--", "sleep", "60")
	wrapper.Env = append([]string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_ACTIVITY_EXEC_ID=" + key.ActivityExecID,
		"WHIMBREL_WORKFLOW_EXEC_ID=" + id}, env...)
	var wout bytes.Buffer
	wrapper.Stdout, wrapper.Stderr = &wout, &wout
	if err := wrapper.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := st.GetActivity(ctx, key)
		if err == nil && a.State == state.Running {
			break
		}
		if time.Now().After(deadline) {
			_ = wrapper.Process.Kill()
			_ = wrapper.Wait()
			t.Fatalf("never RUNNING: %+v %v\n%s", a, err, wout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, code := run(t, env, "whimbrel", "cancel", id); code != 0 {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	done := make(chan error, 1)
	go func() { done <- wrapper.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("wrapper: %v, want exit %d (its command stopped by SIGTERM)\n%s", err, 128+int(syscall.SIGTERM), wout.String())
		}
	case <-time.After(30 * time.Second):
		_ = wrapper.Process.Kill()
		<-done
		t.Fatalf("the wrapper did not stop its command after the cancellation\n%s", wout.String())
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		a, err := st.GetActivity(ctx, key)
		if err == nil && a.State == state.CancelledRunning && a.ExitCode != nil && *a.ExitCode == 143 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("activity %+v (%v), want CANCELLED_RUNNING with exit code 143 recorded beside it\n%s", a, err, wout.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
