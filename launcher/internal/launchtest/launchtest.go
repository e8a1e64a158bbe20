// Package launchtest holds what the tests of the launcher and of its
// backends share: workflows to launch, a backend that counts, and bounded
// waits.
package launchtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// Context is a context for one test's store calls, bounded generously and
// cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Start parses the definition yaml and starts it in st; it returns the
// execution's ID and the definition.
func Start(t testing.TB, st state.Store, yaml string) (string, *definition.Workflow) {
	t.Helper()
	d, err := definition.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(Context(t), st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return id, d
}

// WaitSettled waits, within timeout, until the workflow is terminal, and
// returns it.
func WaitSettled(tb testing.TB, st state.Store, id string, timeout time.Duration) *state.WorkflowExec {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		wf, err := st.GetWorkflow(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		if wf.State.Terminal() {
			return wf
		}
		if time.Now().After(deadline) {
			// What each activity was left in says where it stopped.
			acts, _ := st.Activities(context.Background(), id)
			for _, a := range acts {
				tb.Logf("%s: %s (attempt %d, launched as %q) %s", a.ActivityExecID, a.State, a.Attempt, a.LaunchedAs, a.Reason)
			}
			tb.Fatalf("workflow %s still %s after %s", id, wf.State, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Activity reads the activity name of the workflow wf.
func Activity(t testing.TB, st state.Store, wf, name string) *state.ActivityExec {
	t.Helper()
	a, err := st.GetActivity(Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wf, name), WorkflowExecID: wf})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ManyActivities writes a workflow of n activities running true, a0000 to
// aNNNN; with dependOn, each of them depends on one more activity of that
// name.
func ManyActivities(name string, n int, dependOn string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nactivities:\n", name)
	if dependOn != "" {
		fmt.Fprintf(&b, "  %s: {command: [\"true\"]}\n", dependOn)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  a%04d: {command: [\"true\"]", i)
		if dependOn != "" {
			fmt.Fprintf(&b, ", depends_on: [%s]", dependOn)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// Counting is a backend that records every launch it sees, and answers
// "test:" and the activity's name, or Err.
type Counting struct {
	Err   error
	Block chan struct{} // when set, Launch waits for it

	mu       sync.Mutex
	launches map[state.ActivityKey]int
	jobs     []launcher.Job
}

// Launch implements launcher.Backend.
func (c *Counting) Launch(ctx context.Context, j launcher.Job) (string, error) {
	if c.Block != nil {
		<-c.Block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launches == nil {
		c.launches = map[state.ActivityKey]int{}
	}
	c.launches[j.Key]++
	c.jobs = append(c.jobs, j)
	if c.Err != nil {
		return "", c.Err
	}
	return "test:" + j.ActivityName, nil
}

// Launches returns how many times each activity was launched.
func (c *Counting) Launches() map[state.ActivityKey]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[state.ActivityKey]int, len(c.launches))
	for k, n := range c.launches {
		out[k] = n
	}
	return out
}

// Jobs returns the jobs launched, in order.
func (c *Counting) Jobs() []launcher.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]launcher.Job(nil), c.jobs...)
}
