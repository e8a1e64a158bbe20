package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// TestRunThirdInterruptQuitsWhileTheStoreFails: on DynamoDB behind the
// fault proxy, once every call to the store fails, the third Ctrl-C of a
// run that supervises its activities inline returns within a short bound
// (30 s here, generous for a loaded machine), though the activity it
// killed cannot record its end: the monitor times that activity out.
func TestRunThirdInterruptQuitsWhileTheStoreFails(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
	st := dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	dir := t.TempDir()
	stubborn := filepath.Join(dir, "stubborn")
	if err := os.WriteFile(filepath.Join(dir, "w.yaml"), []byte(`name: quit
activities:
  stubborn:
    command: ["sh", "-c", "trap '' TERM; echo $$ > `+stubborn+`; while true; do sleep 1; done"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "w.yaml")
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, proxy.Env(t, prefix)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second // a process it left holding its output does not hold the test
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}) // closed once it has exited
	go func() {
		defer close(done)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	readPIDFile(t, stubborn)
	interrupt := func() {
		t.Helper()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatalf("whimbrel run ended before the third Ctrl-C: %v\n%s", cmd.ProcessState, out.String())
		case <-time.After(3 * time.Second):
		}
	}
	interrupt() // the cancellation is recorded; the command ignores SIGTERM
	proxy.SetFaults(dynamotest.Faults{Errors: 1})
	interrupt() // the command is killed; its end cannot be recorded
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("whimbrel run did not quit within 30 s of the third Ctrl-C while the store failed:\n%s", out.String())
	}
}
