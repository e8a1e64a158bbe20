package monitor_test

import (
	"errors"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"github.com/whimbrel/whimbrel/internal/fault"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestLostPageWrittenByTheStepThatReachesIt: the wrapper that opens a
// for_each map dies (as by kill -9) half-way through its first page, and
// no monitor sweeps. The elements that were written run through real
// wrappers; the step that reaches the first missing element writes the
// rest of the lost page at once, not that element alone (which would make
// the map crawl through the page one element at a time, a pace at which
// its account keeps moving and never looks stalled to the monitor).
func TestLostPageWrittenByTheStepThatReachesIt(t *testing.T) {
	t.Parallel()
	const n = 150
	f := newFixture(t, `name: wf
activities:
  a: {command: ["true"]}
  m: {depends_on: [a], for_each: {count: `+strconv.Itoa(n)+`}, max_running: 120, command: ["true"]}
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
	half := workflow.PageSize / 2
	if got := elements(); len(got) != half {
		t.Fatalf("after the death: %d elements, want %d", len(got), half)
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, a := range elements() {
		if _, err := f.st.UpdateActivity(ctx, a.ActivityKey, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			cmd := exec.Command(wrapper, "--", "true")
			cmd.Env = f.env(t, a.ActivityKey)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("element %d: %v\n%s", *a.ItemIndex, err, out)
			}
		}()
	}
	wg.Wait()
	got := elements()
	for i := half; i < workflow.PageSize; i++ {
		if got[i] == nil {
			t.Errorf("element %d is missing once the elements before it ended: the lost page is not written", i)
		}
	}
	// The account is written when a page is announced; the elements'
	// counts are in the map's shards.
	m := f.get(t, "m")
	acc, err := state.ParseMap(m.Map)
	counted, cerr := workflow.CountedElements(ctx, f.st, m)
	if err != nil || cerr != nil || counted != half || acc.Done > half {
		t.Errorf("the map's account %+v (%v), its shards counting %d (%v), want %d elements counted", acc, err, counted, cerr, half)
	}
}
