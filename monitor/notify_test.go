package monitor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestKilledWrapperNotifies: kill -9 of the wrapper that would have
// settled the workflow; the monitor times its activity out, settles the
// workflow, writes the notification, and a deliverer sends it: one
// timed_out delivery, naming the activity.
func TestKilledWrapperNotifies(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []workflow.Body
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b workflow.Body
		_ = json.Unmarshal(raw, &b)
		mu.Lock()
		got = append(got, b)
		mu.Unlock()
	}))
	t.Cleanup(rcv.Close)
	f := newFixture(t, "name: wf\nactivities:\n  long: {command: [\"true\"]}\nnotify:\n  - on: [failed]\n    webhook: {url: \""+rcv.URL+"/hook\"}\n")
	f.move(t, "long", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	pidfile := filepath.Join(t.TempDir(), "pid")
	w := f.wrap(t, "long", nil, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "1s", "--",
		"sh", "-c", "echo $$ > "+pidfile+"; exec sleep 300")
	cmdPID := readPID(t, pidfile)
	t.Cleanup(func() { _ = syscall.Kill(cmdPID, syscall.SIGKILL) }) // the orphan the wrapper leaves
	waitFor(t, "a heartbeat", 10*time.Second, func() bool { return !f.get(t, "long").HeartbeatTime.IsZero() })

	sweeping(t, f.st, monitor.Config{Interval: 200 * time.Millisecond, Skew: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = notify.New(f.st, notify.Config{Interval: 100 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	if err := w.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the timeout notified", 60*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Event != "timed_out" || got[0].WorkflowExecID != f.id || len(got[0].Failed) != 1 ||
		got[0].Failed[0].Name != "long" || got[0].Failed[0].State != string(state.TimedOut) {
		t.Fatalf("deliveries: %+v", got)
	}
}
