package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// mapSize is the length of TestMapExactlyOnce's list:
// WHIMBREL_RELIABILITY_MAP, or the suite's size.
func mapSize() int {
	if n, err := strconv.Atoi(os.Getenv("WHIMBREL_RELIABILITY_MAP")); err == nil && n > 0 {
		return n
	}
	// The suite's size: 60 elements in make test, 1,000 in make
	// reliability.
	return size()
}

// TestMapExactlyOnce: a for_each map of mapSize() elements, between an
// upstream and a downstream, under 8 launchers and 2 monitors behind the
// fault proxy, while the elements' wrappers, launchers and one of the
// monitors are killed with SIGKILL (launchers and the monitor come back). Every attempt's command
// runs at most once, every attempt that completed ran exactly once, every
// element ends with a completed attempt (a killed one is retried), and
// the map and the workflow complete.
func TestMapExactlyOnce(t *testing.T) {
	r := newRig(t, "")
	r.tolerance = crashSkew
	st := r.st
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	f := newFleet(t, r.env)
	for i := 0; i < 8; i++ {
		f.skewed(r.clock(i), fmt.Sprintf("launcher-%d", i), "whimbrel-launcher", "--interval", "300ms", "--log-dir", dir)
	}
	for i := 0; i < 2; i++ {
		f.skewed(r.monitorClock(), fmt.Sprintf("monitor-%d", i), "whimbrel-monitor", "--interval", "500ms", "--skew", crashSkew.String(), "--queued-timeout", "5s", "--adopt-pages", "1")
	}
	n := mapSize()
	// The ID is written before the sleep, so a killed wrapper's orphaned
	// command is still counted once.
	command := `echo $WHIMBREL_ACTIVITY_EXEC_ID >> ` + log + `; sleep 0.$((RANDOM % 3 + 1))`
	d, err := definition.Parse("map.yaml", []byte(fmt.Sprintf(`name: bigmap
defaults: {%s}
activities:
  root: {command: [sh, -c, '%s'], retry: {max_attempts: 6, interval: 200ms}}
  each:
    depends_on: [root]
    for_each: {count: %d}
    retry: {max_attempts: 6, interval: 200ms}
    command: [sh, -c, '%s']
  join: {depends_on: [each], command: [sh, -c, '%s'], retry: {max_attempts: 6, interval: 200ms}}
`, killedTimeouts, command, n, command, command)))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var chaos sync.WaitGroup
	killed := map[string]int{}
	var kmu sync.Mutex
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		rnd := rand.New(rand.NewPCG(3, 4))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(300+rnd.IntN(500)) * time.Millisecond):
			}
			if kind := map[int]string{1: "launcher", 3: "monitor"}[i%4]; kind != "" {
				var of []string
				for _, n := range f.names() {
					// monitor-0 is spared: a sweep of a workflow of
					// hundreds of items through the proxy outlasts the
					// pause between two kills, and some monitor must
					// finish one to settle it.
					if strings.HasPrefix(n, kind) && n != "monitor-0" {
						of = append(of, n)
					}
				}
				victim := of[rnd.IntN(len(of))]
				f.kill(victim)
				kmu.Lock()
				killed[kind]++
				kmu.Unlock()
				continue
			}
			refs, err := st.ActivitiesInState(context.Background(), state.ActivityQuery{State: state.Running})
			if err != nil || len(refs) == 0 {
				continue
			}
			// Only the elements' wrappers are killed: the upstream and the
			// downstream run alone, and a kill a second aimed at the one
			// activity running would end each of their attempts in turn
			// (a kill -9 cannot be survived, only retried), which tests the
			// length of an attempt, not the map.
			a, err := st.GetActivity(context.Background(), refs[rnd.IntN(len(refs))].ActivityKey)
			if err != nil || a.ItemIndex == nil || !strings.HasPrefix(a.LaunchedAs, "pid:") {
				continue
			}
			pid, _ := strconv.Atoi(strings.TrimPrefix(a.LaunchedAs, "pid:"))
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				kmu.Lock()
				killed["wrapper"]++
				kmu.Unlock()
			}
		}
	}()
	wfs := settle(t, st, []string{id}, settleTime()+time.Duration(n/100)*time.Minute)
	close(stop)
	chaos.Wait()

	seen := runs(t, log)
	acts, err := st.Activities(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	completedAt := map[int]bool{}
	attempts := 0
	for _, a := range acts {
		if !a.State.Terminal() {
			t.Errorf("%s is %s in a settled workflow", a.ActivityExecID, a.State)
		}
		if c := seen[a.ActivityExecID]; c > 1 {
			t.Errorf("%s ran %d times", a.ActivityExecID, c)
		}
		if a.State == state.Completed && a.Owner != state.MapOwner && seen[a.ActivityExecID] != 1 {
			t.Errorf("%s COMPLETED without running", a.ActivityExecID)
		}
		if a.ItemIndex != nil {
			attempts++
			if a.State == state.Completed {
				completedAt[*a.ItemIndex] = true
			}
		}
	}
	if wfs[0].State != state.WorkflowCompleted {
		t.Errorf("the workflow is %s: %s", wfs[0].State, wfs[0].Reason)
		logged := 0
		for _, a := range acts {
			if a.State != state.Completed && (a.ItemIndex == nil || logged < 30) {
				if a.ItemIndex != nil {
					logged++
				}
				t.Logf("%s attempt %d: %s: %s (%s)", state.ItemName(a.ActivityName, index(a)), a.Attempt, a.State, a.Reason, a.Error)
			}
		}
	}
	if len(completedAt) != n {
		t.Errorf("%d of %d elements completed", len(completedAt), n)
	}
	t.Logf("a map of %d elements (%d attempts) under 8 launchers and 2 monitors; killed %v", n, attempts, killed)
	r.report(t)
	if killed["wrapper"] == 0 || killed["launcher"] == 0 || killed["monitor"] == 0 {
		t.Errorf("the chaos killed too little to mean anything: %v", killed)
	}
}

// index is an element's index, or -1 for an activity that is none.
func index(a *state.ActivityExec) int {
	if a.ItemIndex == nil {
		return -1
	}
	return *a.ItemIndex
}
