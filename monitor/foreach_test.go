package monitor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// env is the environment of a wrapper for the activity k of f.
func (f *fixture) env(t *testing.T, k state.ActivityKey) []string {
	return append(dynamotest.Env(t, f.st.Prefix()), "PATH="+os.Getenv("PATH"),
		"WHIMBREL_ACTIVITY_EXEC_ID="+k.ActivityExecID, "WHIMBREL_WORKFLOW_EXEC_ID="+k.WorkflowExecID)
}

// TestRepairAfterDeathMidPage: the wrapper that opens a for_each map dies
// (as by kill -9: no write after) half-way through writing the first page
// of elements, after the map's account announced it. The monitor writes
// the missing elements; every element's command then runs exactly once,
// the later pages are written by the elements' wrappers as they end, and
// the map and its downstream complete.
func TestRepairAfterDeathMidPage(t *testing.T) {
	t.Parallel()
	const n = 150
	f := newFixture(t, `name: wf
activities:
  a: {command: ["true"]}
  m: {depends_on: [a], for_each: {count: `+strconv.Itoa(n)+`}, max_running: 120, command: ["true"]}
  b: {depends_on: [m], command: ["true"]}
`)
	f.move(t, "a", state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	w := f.wrap(t, "a", []string{fault.Env + "=" + fault.MidPage}, "--", "true")
	var ee *exec.ExitError
	if err := w.Wait(); !errors.As(err, &ee) || ee.ExitCode() != fault.ExitCode {
		t.Fatalf("wrapper: %v, want the fault's exit", err)
	}
	ctx := testbin.Context(t)
	elements := func() map[int]*state.ActivityExec {
		acts, err := f.st.Activities(ctx, f.id)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]*state.ActivityExec{}
		for _, a := range acts {
			if a.ItemIndex != nil {
				out[*a.ItemIndex] = a
			}
		}
		return out
	}
	m := f.get(t, "m")
	acc, err := state.ParseMap(m.Map)
	if err != nil || m.State != state.Running || acc.Created != workflow.PageSize || len(elements()) != workflow.PageSize/2 {
		t.Fatalf("after the death: map %s, account %+v (%v), %d elements; want RUNNING with a page announced and half of it written", m.State, acc, err, len(elements()))
	}
	// Each sweep steps the map; one that finds its account unmoved since
	// the last writes the missing elements.
	mon := monitor.New(f.st, monitor.Config{})
	missing := -1
	for range 5 {
		if _, err := mon.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		got := elements()
		missing = -1
		for i := 0; i < workflow.PageSize && missing < 0; i++ {
			if got[i] == nil {
				missing = i
			}
		}
		if missing < 0 {
			break
		}
	}
	if missing >= 0 {
		t.Fatalf("element %d is still missing after five sweeps, want the whole first page", missing)
	}
	// Run every READY element through a real wrapper until none is left.
	log := filepath.Join(t.TempDir(), "log")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var ready []*state.ActivityExec
		for _, a := range elements() {
			if a.State == state.Ready {
				ready = append(ready, a)
			}
		}
		if len(ready) == 0 {
			break
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, a := range ready {
			if _, err := f.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued}); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				cmd := exec.Command(wrapper, "--", "sh", "-c", `echo "$WHIMBREL_ITEM_INDEX" >> `+log)
				cmd.Env = f.env(t, a.ActivityKey)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("element %d: %v\n%s", *a.ItemIndex, err, out)
				}
			}()
		}
		wg.Wait()
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		ran[l]++
	}
	for i := 0; i < n; i++ {
		if ran[strconv.Itoa(i)] != 1 {
			t.Errorf("element %d ran %d times, want once", i, ran[strconv.Itoa(i)])
		}
	}
	if len(ran) != n {
		t.Errorf("%d elements ran, want %d", len(ran), n)
	}
	if m := f.get(t, "m"); m.State != state.Completed {
		t.Errorf("the map is %s (%s), want COMPLETED", m.State, m.Reason)
	}
	if b := f.get(t, "b"); b.State != state.Ready {
		t.Errorf("the downstream is %s, want READY", b.State)
	}
}
