package ecs_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/ecs"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

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
	cfg, err := config.LoadDefaultConfig(launchtest.Context(t), config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("k", "s", "")),
		config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	backend := &ecs.Backend{API: awsecs.NewFromConfig(cfg)}
	st := dynamotest.NewStore(t, dynamodb.Options{})
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchECS: backend},
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()}})

	id, _ := launchtest.Start(t, st, ecsWorkflow)
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
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
	a, err := st.GetActivity(launchtest.Context(t), key)
	if err != nil || a.State != state.Queued || !strings.HasSuffix(a.LaunchedAs, "/"+req["clientToken"].(string)) {
		t.Errorf("activity after launch: %+v, %v", a, err)
	}

	// The client token is the same for the same launch: a repeat cannot
	// start a second task.
	job := launcher.Job{Key: key, ActivityName: "extract", Settings: definition.Settings{Launch: &definition.Launch{Type: "ecs", TaskDefinition: "etl:3", Container: "main"}}}
	for i := 0; i < 2; i++ {
		if _, err := backend.Launch(launchtest.Context(t), job); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := srv.requests[1]["clientToken"], srv.requests[2]["clientToken"]; a != b || a != req["clientToken"] {
		t.Errorf("client tokens %v, %v, %v differ", req["clientToken"], a, b)
	}

	// A failed RunTask ends the activity FAILED with ECS's answer, and the
	// workflow with it.
	srv.fail = "No Container Instances were found in your cluster."
	id2, _ := launchtest.Start(t, st, ecsWorkflow)
	if _, err := l.Once(launchtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	failed, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id2, "extract"), WorkflowExecID: id2})
	if err != nil || failed.State != state.Failed || !strings.Contains(failed.Error, "No Container Instances") ||
		!strings.HasPrefix(failed.Reason, "launch failed") {
		t.Errorf("after a failed RunTask: %+v, %v", failed, err)
	}
	wf, err := st.GetWorkflow(launchtest.Context(t), id2)
	if err != nil || wf.State != state.WorkflowFailed {
		t.Errorf("workflow after a failed launch: %+v, %v", wf, err)
	}
}
