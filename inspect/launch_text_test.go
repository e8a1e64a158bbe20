package inspect_test

import (
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/inspect"
)

// TestTextLaunchDetails: the text view shows an ECS activity's task ARN
// and a Kubernetes activity's namespace/Job under WHERE, not its
// container's pid, and a failed launch's error once.
func TestTextLaunchDetails(t *testing.T) {
	arn := "arn:aws:ecs:eu-west-1:123456789012:task/batch/0f1e2d3c"
	msg := "ecs RunTask etl:3: ClientException: TaskDefinition is inactive"
	s := &inspect.Status{
		Workflow: inspect.Workflow{ID: "w::1", Name: "w", State: "FAILED"},
		Activities: []inspect.Activity{
			{Name: "task", State: "COMPLETED", Host: "ip-10-0-0-1", PID: 7, LaunchedAs: arn},
			{Name: "local", State: "COMPLETED", Host: "laptop", PID: 42, LaunchedAs: "pid:41"},
			{Name: "job", State: "RUNNING", Host: "wb-job-0a1b2c3d4e5f-x7k2p", PID: 1, LaunchedAs: "kubernetes:batch/wb-job-0a1b2c3d4e5f"},
			{Name: "unlaunched", State: "FAILED", Reason: "launch failed: " + msg, StderrTail: msg},
			{Name: "crashed", State: "FAILED", Reason: "exit status 2", StderrTail: "boom"},
		},
	}
	var b strings.Builder
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{arn, "kubernetes:batch/wb-job-0a1b2c3d4e5f", "laptop pid 42", "why: launch failed: " + msg, "why: exit status 2", "stderr: boom"} {
		if !strings.Contains(out, want) {
			t.Errorf("text view lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ip-10-0-0-1 pid 7") || strings.Contains(out, "x7k2p pid 1") {
		t.Errorf("text view shows the ECS task's pid instead of its ARN:\n%s", out)
	}
	if n := strings.Count(out, "TaskDefinition is inactive"); n != 1 {
		t.Errorf("the launch error is printed %d times, want once:\n%s", n, out)
	}
}
