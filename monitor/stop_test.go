package monitor_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// stoppingStore is a real store whose Activities call stops the sweep
// (cancels its context) before reading: the monitor is told to stop in the
// middle of a repair.
type stoppingStore struct {
	*dynamodb.Store
	stop func()
}

func (s stoppingStore) Activities(ctx context.Context, id string) ([]*state.ActivityExec, error) {
	s.stop()
	return s.Store.Activities(ctx, id)
}

// lockedBuilder is a strings.Builder the logger may write from any goroutine.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStopInARepairIsNoWarning: a monitor stopped while it repairs a
// workflow says nothing about a repair it "could not" do: it was cut
// short, and the next sweep takes it up again.
func TestStopInARepairIsNoWarning(t *testing.T) {
	f := newFixture(t, "name: cut\nactivities:\n  a:\n    command: [\"true\"]\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuilder
	log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug})
	_, err := monitor.New(stoppingStore{Store: f.st, stop: cancel}, monitor.Config{Logger: log}).Sweep(ctx)
	if err == nil {
		t.Errorf("the sweep stopped in a repair returned no error")
	}
	if strings.Contains(out.String(), "could not repair") {
		t.Errorf("a stopped repair was logged as a failure:\n%s", out.String())
	}
}
