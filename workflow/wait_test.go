package workflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// scriptedReads answers GetWorkflow from a script, one answer per read; the last
// answer repeats.
type scriptedReads struct {
	mu      sync.Mutex
	answers []func() (*state.WorkflowExec, error)
	n       int
}

func (r *scriptedReads) GetWorkflow(context.Context, string) (*state.WorkflowExec, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answers[min(r.n, len(r.answers)-1)]
	r.n++
	return a()
}

func seenIn(s state.WorkflowState) func() (*state.WorkflowExec, error) {
	return func() (*state.WorkflowExec, error) { return &state.WorkflowExec{State: s}, nil }
}

func readFails(err error) func() (*state.WorkflowExec, error) {
	return func() (*state.WorkflowExec, error) { return nil, err }
}

// TestWaitOutlastsWhatPasses: a workflow not written yet and a store error
// are waited through; Wait returns the settled workflow.
func TestWaitOutlastsWhatPasses(t *testing.T) {
	r := &scriptedReads{answers: []func() (*state.WorkflowExec, error){
		readFails(state.ErrNotFound), readFails(errors.New("throttled")), seenIn(state.WorkflowRunning), seenIn(state.WorkflowFailed),
	}}
	wf, err := workflow.Wait(context.Background(), r, "w::1", time.Millisecond, nil)
	if err != nil || wf.State != state.WorkflowFailed || r.n != 4 {
		t.Fatalf("Wait = %v, %v after %d scriptedReads; want the FAILED workflow after 4", wf, err, r.n)
	}
}

// TestWaitSaysWhereItStopped: an ended context stops the wait, and the
// error says what the workflow was last seen doing.
func TestWaitSaysWhereItStopped(t *testing.T) {
	for _, tc := range []struct {
		answer func() (*state.WorkflowExec, error)
		want   string
	}{
		{seenIn(state.WorkflowRunning), "stopped waiting; workflow w::1 is still RUNNING"},
		{readFails(state.ErrNotFound), "stopped waiting for workflow w::1"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		wf, err := workflow.Wait(ctx, &scriptedReads{answers: []func() (*state.WorkflowExec, error){tc.answer}}, "w::1", time.Millisecond, nil)
		cancel()
		if wf != nil || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Wait = %v, %v; want %q", wf, err, tc.want)
		}
	}
}

// TestWaitRefusesANonPositiveInterval: an interval that is not positive
// is an error that says so, not a panic of the ticker.
func TestWaitRefusesANonPositiveInterval(t *testing.T) {
	for _, every := range []time.Duration{0, -time.Second} {
		r := &scriptedReads{answers: []func() (*state.WorkflowExec, error){seenIn(state.WorkflowRunning)}}
		wf, err := workflow.Wait(context.Background(), r, "w::1", every, nil)
		if wf != nil || err == nil || !strings.Contains(err.Error(), "positive") {
			t.Errorf("Wait every %s = %v, %v; want an error saying the interval must be positive", every, wf, err)
		}
	}
}
