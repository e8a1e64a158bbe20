package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

var binary string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		binary = filepath.Join(dir, "whimbrel-monitor")
		return m.Run()
	}, nil, map[string]string{"whimbrel-monitor": "."})
}

func run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
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

func TestOnce(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	past := time.Now().Add(-10 * time.Minute)
	ctx := context.Background()
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued, At: past},
		{From: []state.ActivityState{state.Queued}, To: state.Running, At: past,
			Claim: storetest.Claim("gone")},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	out, code := run(t, dynamotest.Env(t, st.Prefix()), "--once")
	if code != 0 || !strings.Contains(out, "timed out") || !strings.Contains(out, "timed_out=1") || !strings.Contains(out, "settled=1") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if a, err := st.GetActivity(ctx, k); err != nil || a.State != state.TimedOut {
		t.Errorf("activity %+v %v", a, err)
	}
	if out, code := run(t, dynamotest.Env(t, st.Prefix()), "--interval", "0s"); code != 2 || !strings.Contains(out, "--interval") {
		t.Errorf("--interval 0: exit %d\n%s", code, out)
	}
	for _, bad := range [][]string{{"--notify-concurrency", "-1"}, {"--notify-timeout", "0s"}} {
		if out, code := run(t, dynamotest.Env(t, st.Prefix()), bad...); code != 2 || !strings.Contains(out, "--notify-") {
			t.Errorf("%v: exit %d\n%s", bad, code, out)
		}
	}
}
