package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestForgedEndsDoNotTouchARunningWrapper: while a wrapper (whimbrel-run
// --api simple) runs its command, a client that writes raw events without
// an owner, as any holder of PutItem on the events table could, tries to
// complete the activity with a forged output, fail it, time it out, cancel
// it and keep it alive. Every one is rejected; the command runs on, and the
// wrapper records its own end and output.
func TestForgedEndsDoNotTouchARunningWrapper(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	dir := t.TempDir()
	file := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(file, []byte("name: held\nactivities:\n  job:\n    command: [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := run(t, env, "whimbrel", "start", file)
	if code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	id := strings.TrimSpace(out)
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "job"), WorkflowExecID: id}
	daemon(t, env, "whimbrel-poller", "--poll-interval", "50ms", "--discovery", "1s", "--order-window", "1s")

	// The command waits (at most a minute) for the test to let it finish.
	release := filepath.Join(dir, "release")
	script := `i=0; while [ ! -e "$RELEASE" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo '{"real": 1}' > "$WHIMBREL_OUTPUT"`
	wrapper := exec.Command(filepath.Join(bin, "whimbrel-run"), "--api", "simple", "--heartbeat-interval", "500ms",
		"--heartbeat-timeout", "10s", "--", "sh", "-c", script)
	wrapper.Env = append([]string{"PATH=" + os.Getenv("PATH"), "RELEASE=" + release, "WHIMBREL_ACTIVITY_EXEC_ID=" + key.ActivityExecID,
		"WHIMBREL_WORKFLOW_EXEC_ID=" + id}, env...)
	var wout bytes.Buffer
	wrapper.Stdout, wrapper.Stderr = &wout, &wout
	wrapper.WaitDelay = 10 * time.Second // a command left behind must not hold the test through the pipe
	if err := wrapper.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = wrapper.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = wrapper.Process.Kill()
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting: %s\n%s", what, wout.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("the wrapper's claim", func() bool {
		a, err := st.GetActivity(ctx, key)
		return err == nil && a.State == state.Running
	})

	client := dynamotest.Client(t)
	num := func(v int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	forge := func(transition string, extra map[string]types.AttributeValue) string {
		now := time.Now().UTC()
		eventID := key.ActivityExecID + "::" + uuid.NewString()
		item := map[string]types.AttributeValue{"activity_event_id": str(eventID), "activity_exec_id": str(key.ActivityExecID),
			"transition": str(transition), "source": str("a forger"),
			"when": &types.AttributeValueMemberL{Value: []types.AttributeValue{num(now.Year()), num(int(now.Month())), num(now.Day()),
				num(now.Hour()), num(now.Minute()), num(now.Second())}}}
		for k, v := range extra {
			item[k] = v
		}
		if _, err := client.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(st.Prefix() + dynamodb.TableActivityEvent), Item: item}); err != nil {
			t.Fatal(err)
		}
		return eventID
	}
	forged := map[string]string{
		"COMPLETED": forge("COMPLETED", map[string]types.AttributeValue{"output": str(`{"forged": true}`), "exit_code": num(0)}),
		"FAILED":    forge("FAILED", map[string]types.AttributeValue{"exit_code": num(1)}),
		"TIMED_OUT": forge("TIMED_OUT", nil),
		"CANCEL":    forge("CANCEL", nil),
		"HEARTBEAT": forge("HEARTBEAT", nil),
	}
	inbox := dynamoinbox.New(st)
	for transition, eventID := range forged {
		waitFor("the forged "+transition+" decided", func() bool {
			ev, err := inbox.GetEvent(ctx, eventID, key.ActivityExecID)
			return err == nil && ev.Outcome.Processed()
		})
		ev, _ := inbox.GetEvent(ctx, eventID, key.ActivityExecID)
		if ev.Outcome.Result != state.OutcomeRejected || !strings.Contains(ev.Outcome.Reason, "without an owner") {
			t.Errorf("forged %s: %+v, want rejected as sent without the holder's owner", transition, ev.Outcome)
		}
	}
	if a, err := st.GetActivity(ctx, key); err != nil || a.State != state.Running {
		t.Fatalf("after the forged events: %+v, %v; want still RUNNING", a, err)
	}
	select {
	case <-done:
		t.Fatalf("the wrapper ended before its command was released: %v\n%s", waitErr, wout.String())
	default:
	}

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("wrapper: %v, want exit 0\n%s", waitErr, wout.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the wrapper did not end\n%s", wout.String())
	}
	waitFor("the wrapper's COMPLETED applied", func() bool {
		a, err := st.GetActivity(ctx, key)
		return err == nil && a.State == state.Completed
	})
	a, _ := st.GetActivity(ctx, key)
	if a.Output != `{"real":1}` || a.ExitCode == nil || *a.ExitCode != 0 {
		t.Errorf("activity: output %q, exit %v; want the wrapper's own output and exit 0", a.Output, a.ExitCode)
	}
}
