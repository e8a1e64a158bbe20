package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// temporalServer is a `temporal server start-dev` this program started: a
// real Temporal server (frontend, history, matching, workers) in one
// process, on a SQLite file.
type temporalServer struct {
	cmd     *exec.Cmd
	address string
	done    chan struct{}
}

// freePort is a loopback port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startTemporal starts the dev server headless on free loopback ports with
// its database in dir, and waits until its frontend answers. Pending
// activities per workflow are raised from their default of 2,000 so that
// a fan-out of 2,000 fits with its root.
func startTemporal(cli, dir string) (*temporalServer, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	logFile, err := os.Create(filepath.Join(dir, "temporal.log"))
	if err != nil {
		return nil, fmt.Errorf("create the server's log: %w", err)
	}
	cmd := exec.Command(cli, "server", "start-dev", "--headless",
		"--db-filename", filepath.Join(dir, "temporal.db"),
		"--ip", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
		"--http-port", strconv.Itoa(ports[1]), "--metrics-port", strconv.Itoa(ports[2]),
		"--log-level", "error",
		"--dynamic-config-value", "limit.numPendingActivities.error=10000")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s server start-dev: %w", cli, err)
	}
	s := &temporalServer{cmd: cmd, address: "127.0.0.1:" + strconv.Itoa(ports[0]), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-s.done:
			return nil, fmt.Errorf("temporal server start-dev exited at start: see %s", logFile.Name())
		default:
		}
		if err := s.healthy(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("temporal server start-dev did not answer on %s within 2 minutes: %w (log: %s)", s.address, err, logFile.Name())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (s *temporalServer) healthy() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.address, Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

func (s *temporalServer) pid() int { return s.cmd.Process.Pid }

// stop ends the server with SIGTERM, as a terminal's ^C would, and kills it
// should it not have exited within 30 s.
func (s *temporalServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func quietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// The workflows of the worker, each the DAG Whimbrel's side runs as a
// definition. Every activity runs one command as a subprocess; none is
// retried, as Whimbrel's activities are not by default.

var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Minute,
	RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
}

// FanOut runs root, then n activities of argv at once.
func FanOut(ctx workflow.Context, root []string, n int, argv []string) error {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	if err := workflow.ExecuteActivity(ctx, Command, root).Get(ctx, nil); err != nil {
		return err
	}
	return parallel(ctx, n, argv)
}

// Parallel runs n activities of argv at once.
func Parallel(ctx workflow.Context, n int, argv []string) error {
	return parallel(workflow.WithActivityOptions(ctx, activityOptions), n, argv)
}

func parallel(ctx workflow.Context, n int, argv []string) error {
	fs := make([]workflow.Future, n)
	for i := range fs {
		fs[i] = workflow.ExecuteActivity(ctx, Command, argv)
	}
	var first error
	for _, f := range fs {
		if err := f.Get(ctx, nil); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Chain runs the steps one after another.
func Chain(ctx workflow.Context, steps [][]string) error {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	for _, argv := range steps {
		if err := workflow.ExecuteActivity(ctx, Command, argv).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

// Command is the one activity: it runs argv and fails with its output if
// it exits non-zero.
func Command(ctx context.Context, argv []string) error {
	if len(argv) == 0 {
		return errors.New("run an activity: no command")
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("run %s: %w: %s", argv[0], err, out)
	}
	return nil
}

// runWorker is the worker process of one measurement: it starts a worker
// on a task queue of its own, starts the workload's workflow as a client,
// waits for its end and exits. Its CPU (worker, client and the commands it
// ran) is what wait4 reports to the harness.
func runWorker(address string, w work) error {
	c, err := client.Dial(client.Options{HostPort: address, Logger: quietLogger()})
	if err != nil {
		return fmt.Errorf("dial the temporal server %s: %w", address, err)
	}
	defer c.Close()
	queue := fmt.Sprintf("peers-%d-%d", os.Getpid(), time.Now().UnixNano())
	wk := worker.New(c, queue, worker.Options{})
	wk.RegisterWorkflow(FanOut)
	wk.RegisterWorkflow(Parallel)
	wk.RegisterWorkflow(Chain)
	wk.RegisterActivity(Command)
	if err := wk.Start(); err != nil {
		return fmt.Errorf("start the worker: %w", err)
	}
	defer wk.Stop()
	ctx := context.Background()
	opts := client.StartWorkflowOptions{ID: queue, TaskQueue: queue, WorkflowExecutionTimeout: time.Hour}
	var run client.WorkflowRun
	switch w.kind {
	case kindFan:
		run, err = c.ExecuteWorkflow(ctx, opts, FanOut, []string{"true"}, w.n, []string{"true"})
	case kindChain:
		run, err = c.ExecuteWorkflow(ctx, opts, Chain, chainSteps(w.dir, w.n))
	case kindMemory:
		run, err = c.ExecuteWorkflow(ctx, opts, Parallel, w.n, sleepCommand)
	default:
		return fmt.Errorf("run a workload: unknown kind %q", w.kind)
	}
	if err != nil {
		return fmt.Errorf("start the %s workflow: %w", w.kind, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("the %s workflow: %w", w.kind, err)
	}
	return nil
}
