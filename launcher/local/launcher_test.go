package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

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
	id, d := launchtest.Start(t, st, b.String())
	if len(d.Activities) != 50 {
		t.Fatalf("%d activities, want 50", len(d.Activities))
	}

	nl, err := nudge.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	lb := &local.Backend{Wrapper: wrapper, LogDir: t.TempDir(),
		Env: append(dynamotest.Env(t, st.Prefix()), "PATH="+os.Getenv("PATH"), nudge.Env+"="+nl.Addr())}
	l := launcher.New(st, launcher.Config{
		Backends: map[string]launcher.Backend{definition.LaunchLocal: lb},
		Interval: 200 * time.Millisecond, Nudge: nl.C(),
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()},
	})
	ctx, cancel := context.WithCancel(launchtest.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		lb.Wait()
	}()

	if wf := launchtest.WaitSettled(t, st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	acts, err := st.Activities(launchtest.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.State != state.Completed || !strings.HasPrefix(a.LaunchedAs, "pid:") || a.ExitCode == nil || *a.ExitCode != 0 {
			t.Errorf("%s: %s launched as %q exit %v", a.ActivityName, a.State, a.LaunchedAs, a.ExitCode)
		}
	}
}

// TestWrapperThatNeverClaims: a local wrapper that exits before claiming
// its activity fails it at once, with why, instead of leaving it QUEUED
// until the queued timeout.
func TestWrapperThatNeverClaims(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := launchtest.Start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n")
	broken := filepath.Join(t.TempDir(), "whimbrel-run")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'cannot reach the store' >&2\nexit 125\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lb := &local.Backend{Wrapper: broken, LogDir: t.TempDir()}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: lb}})
	lb.Exited = func(j launcher.Job, exit error) { l.Exited(context.Background(), j, exit) }
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d %v", n, err)
	}
	lb.Wait()
	a, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
	if err != nil || a.State != state.Failed || !strings.Contains(a.Reason, "exit status 125") || !strings.Contains(a.Reason, "before claiming") {
		t.Errorf("activity: %+v %v", a, err)
	}
	if wf := launchtest.WaitSettled(t, st, id, 10*time.Second); wf.State != state.WorkflowFailed {
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
	id, _ := launchtest.Start(t, st, "name: w\nactivities:\n  a: {command: [\"true\"]}\n")
	quiet := filepath.Join(t.TempDir(), "whimbrel-run")
	if err := os.WriteFile(quiet, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lb := &local.Backend{Wrapper: quiet, LogDir: t.TempDir()}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: lb}})
	exited := make(chan error, 1)
	lb.Exited = func(j launcher.Job, exit error) {
		l.Exited(context.Background(), j, exit)
		exited <- exit
	}
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d %v", n, err)
	}
	lb.Wait()
	if err := <-exited; err != nil {
		t.Fatalf("the wrapper's exit: %v, want exit status 0", err)
	}
	a, err := st.GetActivity(launchtest.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
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
	id, _ := launchtest.Start(t, st, launchtest.ManyActivities("refill", 5, ""))
	lb := &local.Backend{Wrapper: wrapper, LogDir: t.TempDir(),
		Env: append(dynamotest.Env(t, st.Prefix()), "PATH="+os.Getenv("PATH"))}
	l := local.NewLauncher(st, launcher.Config{Interval: time.Hour, MaxRunning: 1,
		StoreEnv: map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()}}, lb, nil)
	ctx, cancel := context.WithCancel(launchtest.Context(t))
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		<-done
		lb.Wait()
	}()
	if wf := launchtest.WaitSettled(t, st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
}
