package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestPoolLauncherKilledBetweenClaimAndLaunch: a launcher process takes
// the only slot of a pool and moves its activity to QUEUED, and is killed
// with SIGKILL before it calls its backend. The monitor fails the
// activity at its queued timeout, which frees the slot; its retry is
// launched by another launcher process and runs exactly once; the pool
// never holds more than its slot, and holds none at the end.
func TestPoolLauncherKilledBetweenClaimAndLaunch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := testbin.Build(dir, []string{"-tags", "whimbrel_fault"}, map[string]string{"whimbrel-launcher": "."}); err != nil {
		t.Fatal(err)
	}
	faulty := filepath.Join(dir, "whimbrel-launcher")
	wrapper := filepath.Join(filepath.Dir(binary), "whimbrel-run")
	stores := map[string]func(t *testing.T) (state.Store, []string){
		"dynamodb": func(t *testing.T) (state.Store, []string) {
			st := dynamotest.NewStore(t, dynamodb.Options{})
			return st, dynamotest.Env(t, st.Prefix())
		},
		"sqlite": func(t *testing.T) (state.Store, []string) {
			path := filepath.Join(t.TempDir(), "state.db")
			st, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			return st, []string{"WHIMBREL_STORE=sqlite:" + path}
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testbin.Context(t)
			st, env := newStore(t)
			env = append(env, "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir())
			ps := st.(state.PoolStore)
			if _, err := state.SetPool(ctx, ps, "one", 1, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			runs := filepath.Join(t.TempDir(), "runs.log")
			d, err := definition.Parse("k.yaml", []byte("name: killed\nactivities:\n  job:\n    pool: one\n    queued_timeout: 3s\n"+
				"    retry: {max_attempts: 2, interval: 1s}\n    command: [sh, -c, 'echo ran >> "+runs+"']\n"))
			if err != nil {
				t.Fatal(err)
			}
			id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
			if err != nil {
				t.Fatal(err)
			}

			// The first launcher stops after its claim; it is killed there.
			first := exec.Command(faulty, "--types", "local", "--wrapper", wrapper, "--interval", "100ms")
			first.Env = append(append([]string(nil), env...), fault.Env+"="+fault.AfterClaim+fault.Hang)
			stderr, err := first.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
			hanging := make(chan struct{})
			go func() {
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "fault: hanging at "+fault.AfterClaim) {
						close(hanging)
						break
					}
				}
				for sc.Scan() { // drain
				}
			}()
			select {
			case <-hanging:
			case <-time.After(2 * time.Minute):
				t.Fatal("the launcher never reached its claim")
			}
			key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "job"), WorkflowExecID: id}
			if a, err := st.GetActivity(ctx, key); err != nil || a.State != state.Queued {
				t.Fatalf("after the claim: %v, %v; want QUEUED", a, err)
			}
			if s, _ := state.ReadPool(ctx, ps, "one"); s == nil || s.Held != 1 {
				t.Fatalf("after the claim the pool holds %+v, want its slot", s)
			}
			if err := first.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = first.Wait()

			most := make(chan int, 1)
			stop := make(chan struct{})
			go func() {
				n := 0
				for {
					select {
					case <-stop:
						most <- n
						return
					case <-time.After(20 * time.Millisecond):
					}
					if s, err := state.ReadPool(context.Background(), ps, "one"); err == nil {
						n = max(n, s.Held)
					}
				}
			}()
			second := exec.Command(binary, "--types", "local", "--wrapper", wrapper, "--interval", "100ms")
			second.Env = env
			if err := second.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() })
			mctx, stopMonitor := context.WithCancel(context.Background())
			monitored := make(chan struct{})
			go func() {
				defer close(monitored)
				_ = monitor.New(st, monitor.Config{Interval: 300 * time.Millisecond}).Run(mctx)
			}()
			t.Cleanup(func() { stopMonitor(); <-monitored })

			deadline := time.Now().Add(3 * time.Minute)
			var wf *state.WorkflowExec
			for {
				if wf, err = st.GetWorkflow(ctx, id); err == nil && wf.State.Terminal() {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the workflow did not settle: %+v, %v", wf, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			close(stop)
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
			}
			out, err := os.ReadFile(runs)
			if err != nil || strings.Count(string(out), "ran") != 1 {
				t.Errorf("the command ran %d times (%v), want exactly once", strings.Count(string(out), "ran"), err)
			}
			acts, _ := st.Activities(ctx, id)
			var states []string
			for _, a := range acts {
				states = append(states, string(a.State))
			}
			if len(acts) != 2 {
				t.Errorf("attempts: %v, want the killed one FAILED and its retry COMPLETED", states)
			}
			if n := <-most; n > 1 {
				t.Errorf("the pool of 1 held %d slots at once", n)
			}
			if s, _ := state.ReadPool(ctx, ps, "one"); s == nil || s.Held != 0 {
				t.Errorf("the pool after the run holds %+v, want nothing", s)
			}
		})
	}
}
