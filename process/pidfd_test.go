//go:build linux

package process

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestOtherExitsDoNotWakeTheWaiter runs a command that is not reaped by a
// subreaper (as a launcher supervising many commands inline runs each)
// while the test's process starts and waits for many other children: the
// command's waiter must poll for its own child's exit only, not once for
// every child of the process that exits.
func TestOtherExitsDoNotWakeTheWaiter(t *testing.T) {
	p, err := Start(Config{Args: []string{"sleep", "60"}, CallerSignals: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if os.Getpid() == 1 {
		t.Fatal("the test runs as PID 1: the runner reaps every child there")
	}
	const others = 100
	start := time.Now()
	base := p.polls.Load()
	for range others {
		if err := exec.Command("true").Run(); err != nil {
			t.Fatal(err)
		}
	}
	polls := p.polls.Load() - base
	// The waiter polls every reapInterval besides; allow for those, and
	// for a second either side.
	allowed := int64(time.Since(start)/reapInterval) + 2
	if polls > allowed {
		t.Fatalf("the waiter polled %d times while %d other children exited in %s (at most %d expected): other exits wake it",
			polls, others, time.Since(start).Round(time.Millisecond), allowed)
	}
	select {
	case <-p.Done():
		t.Fatal("the command ended early")
	default:
	}
	if err := p.Stop("test over"); err != nil {
		t.Fatal(err)
	}
	res, _ := p.Wait()
	if res.Signal == 0 {
		t.Fatalf("sleep was not stopped by a signal: %+v", res)
	}
}
