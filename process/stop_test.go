//go:build linux

package process

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestTerminate(t *testing.T) {
	t.Parallel()
	ready := filepath.Join(t.TempDir(), "ready")
	p, err := Start(Config{
		Args:      []string{"sh", "-c", `trap "" TERM; echo > "$1"; sleep 100`, "sh", ready},
		KillGrace: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	readWhenWritten(t, ready)

	// Terminate returns at once, though the child ignores SIGTERM and is
	// only killed after the grace.
	began := time.Now()
	p.Terminate("test terminate")
	if d := time.Since(began); d > 100*time.Millisecond {
		t.Errorf("Terminate took %v; it must not wait for the grace", d)
	}
	p.Terminate("second reason") // ignored: the first reason stands
	res := wait(t, p)
	if d := time.Since(began); d < 500*time.Millisecond {
		t.Errorf("killed after %v, before the grace", d)
	}
	if res.Signal != syscall.SIGKILL || !res.Stopped || res.StopReason != "test terminate" {
		t.Errorf("got signal %v, Stopped %v, StopReason %q; want SIGKILL, true, %q", res.Signal, res.Stopped, res.StopReason, "test terminate")
	}
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	p.Terminate("after Close") // does nothing, and starts nothing
}

// killGrace is the kill grace of TestKillAfterTerm's wrappers.
const killGrace = 500 * time.Millisecond

func TestKillAfterTerm(t *testing.T) {
	t.Parallel()
	// The child ignores SIGTERM: the wrapper kills it after the grace.
	t.Run("after the grace", func(t *testing.T) { killAfterTerm(t, 1, killGrace, killGrace+5*time.Second) })
	// A second SIGTERM kills it at once.
	t.Run("second SIGTERM", func(t *testing.T) { killAfterTerm(t, 2, 0, killGrace) })
}

// killAfterTerm sends sigterms SIGTERMs to a wrapper with KillAfterTerm
// whose command ignores SIGTERM, and checks that the command is killed
// between minElapsed and maxElapsed after the first.
func killAfterTerm(t *testing.T, sigterms int, minElapsed, maxElapsed time.Duration) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd, stderr := wrapperCommand(t, ctx, nil, []string{envKillAfterTerm + "=" + killGrace.String()},
		"sh", "-c", `trap "" TERM; echo > "$1"; sleep 100 & wait; :`, "sh", ready)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	readWhenWritten(t, ready)
	began := time.Now()
	for range sigterms {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	err := cmd.Wait()
	elapsed := time.Since(began)
	if got := cmd.ProcessState.ExitCode(); got != 128+int(syscall.SIGKILL) {
		t.Errorf("wrapper exit status = %d (%v), want %d; stderr:\n%s", got, err, 128+int(syscall.SIGKILL), stderr)
	}
	if elapsed < minElapsed || elapsed > maxElapsed {
		t.Errorf("the command was killed after %v, want between %v and %v; stderr:\n%s", elapsed, minElapsed, maxElapsed, stderr)
	}
}
