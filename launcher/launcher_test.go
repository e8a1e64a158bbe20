package launcher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestEightLaunchersLaunchEachOnce: 1,000 launchable activities, half
// readied by their start (they wait on nothing) and half by an advance, and
// 8 launchers at once: the backend sees each exactly once, and every item
// records it.
func TestEightLaunchersLaunchEachOnce(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	idA, _ := launchtest.Start(t, st, launchtest.ManyActivities("requested", 500, ""))
	idB, _ := launchtest.Start(t, st, launchtest.ManyActivities("readied", 500, "root"))
	// Complete root by hand and advance: its 500 dependents become READY.
	rootKey := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(idB, "root"), WorkflowExecID: idB}
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Ready}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o"}},
		{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"},
	} {
		if _, err := st.UpdateActivity(launchtest.Context(t), rootKey, c); err != nil {
			t.Fatal(err)
		}
	}
	root, _ := st.GetActivity(launchtest.Context(t), rootKey)
	if res, err := workflow.Advance(launchtest.Context(t), st, root, nil); err != nil || len(res.Readied) != 500 {
		t.Fatalf("advance: %d readied, %v", len(res.Readied), err)
	}

	backend := &launchtest.Counting{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for idle := 0; idle < 3; { // until three passes in a row find nothing
				n, err := l.Once(launchtest.Context(t))
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					idle++
				} else {
					idle = 0
				}
			}
		}()
	}
	wg.Wait()

	if len(backend.Launches()) != 1000 {
		t.Errorf("the backend saw %d activities, want 1000", len(backend.Launches()))
	}
	for k, n := range backend.Launches() {
		if n != 1 {
			t.Errorf("%s launched %d times", k.ActivityExecID, n)
		}
	}
	for _, id := range []string{idA, idB} {
		acts, err := st.Activities(launchtest.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			if a.ActivityName == "root" {
				continue
			}
			if a.State != state.Queued || a.LaunchedAs != "test:"+a.ActivityName || backend.Launches()[a.ActivityKey] != 1 {
				t.Errorf("%s: %s launched as %q, seen %d times", a.ActivityName, a.State, a.LaunchedAs, backend.Launches()[a.ActivityKey])
			}
		}
	}
}

func TestMaxRunning(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := launchtest.Start(t, st, launchtest.ManyActivities("capped", 5, ""))
	backend := &launchtest.Counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, MaxRunning: 2})
	if n, err := l.Once(launchtest.Context(t)); n != 2 || err != nil {
		t.Fatalf("first pass launched %d (%v), want the cap of 2", n, err)
	}
	if n, _ := l.Once(launchtest.Context(t)); n != 0 {
		t.Fatalf("second pass launched %d while 2 run, want 0", n)
	}
	// One of them ends: room for one more.
	for k := range backend.Launches() {
		for _, c := range []state.ActivityChange{
			{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o"}},
			{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o"},
		} {
			if _, err := st.UpdateActivity(launchtest.Context(t), k, c); err != nil {
				t.Fatal(err)
			}
		}
		break
	}
	if n, _ := l.Once(launchtest.Context(t)); n != 1 {
		t.Errorf("after one ended, launched %d, want 1", n)
	}
	_ = id
}

// TestDrainFinishesClaimedLaunches: a launch under way when the launcher is
// told to stop is carried out and recorded.
func TestDrainFinishesClaimedLaunches(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := launchtest.Start(t, st, launchtest.ManyActivities("drain", 3, ""))
	backend := &launchtest.Counting{Block: make(chan struct{})}
	// One worker: the other two are not claimed before the stop.
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, Workers: 1})
	ctx, cancel := context.WithCancel(launchtest.Context(t))
	done := make(chan int, 1)
	go func() {
		n, _ := l.Once(ctx)
		done <- n
	}()
	// Wait for the first claim, then stop the launcher mid-launch.
	deadline := time.Now().Add(20 * time.Second)
	for {
		acts, err := st.Activities(launchtest.Context(t), id)
		if err != nil {
			t.Fatal(err)
		}
		queued := 0
		for _, a := range acts {
			if a.State == state.Queued {
				queued++
			}
		}
		if queued > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing was claimed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	close(backend.Block)
	n := <-done
	if n != 1 {
		t.Errorf("launched %d after the stop, want the 1 in flight", n)
	}
	acts, err := st.Activities(launchtest.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		switch {
		case a.State == state.Queued && a.LaunchedAs == "":
			t.Errorf("%s left QUEUED without a launch record", a.ActivityName)
		case a.State != state.Queued && a.State != state.Ready:
			t.Errorf("%s is %s", a.ActivityName, a.State)
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) == false {
		t.Error("the context was not cancelled")
	}
}

// lostAnswer lands the first claim to QUEUED but loses its answer.
type lostAnswer struct {
	launcher.Store
	once sync.Once
}

func (l *lostAnswer) UpdateActivity(ctx context.Context, k state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	a, err := l.Store.UpdateActivity(ctx, k, c)
	lost := false
	if err == nil && c.To == state.Queued {
		l.once.Do(func() { lost = true })
	}
	if lost {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return a, err
}

// TestClaimWhoseAnswerWasLostIsLaunched: the claim's token tells the
// launcher that the move it cannot see was its own.
func TestClaimWhoseAnswerWasLostIsLaunched(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	launchtest.Start(t, st, launchtest.ManyActivities("lost", 1, ""))
	backend := &launchtest.Counting{}
	l := launcher.New(&lostAnswer{Store: st}, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil || len(backend.Launches()) != 1 {
		t.Errorf("launched %d (%v), backend saw %d; want the claimed activity launched", n, err, len(backend.Launches()))
	}
}

// TestWorkflowWithoutDefinition: a workflow started by another client has
// no definition here; its activities are left alone, and the launcher goes
// on.
func TestWorkflowWithoutDefinition(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	w := storetest.NewWorkflow(t, "foreign", storetest.DAG{"a": nil, "b": nil, "c": nil})
	w.Exec.Definition = ""
	storetest.Create(t, st, w)
	for _, n := range []string{"a", "b", "c"} {
		if _, err := st.UpdateActivity(launchtest.Context(t), storetest.Key(w, n), state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Ready}); err != nil {
			t.Fatal(err)
		}
	}
	launchtest.Start(t, st, launchtest.ManyActivities("ours", 1, ""))
	backend := &launchtest.Counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}})
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
		t.Errorf("launched %d (%v), want only the activity with a definition", n, err)
	}
}

// TestConcurrentLaunchesHonourMaxRunning: launches run side by side, never
// more at once than the workers, never more in all than --max-running.
func TestConcurrentLaunchesHonourMaxRunning(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	launchtest.Start(t, st, launchtest.ManyActivities("wide", 30, ""))
	backend := &gauge{delay: 300 * time.Millisecond, until: 4}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, Workers: 4, MaxRunning: 10})
	n, err := l.Once(launchtest.Context(t))
	if n != 10 || err != nil {
		t.Fatalf("Once: launched %d, %v; want the cap of 10", n, err)
	}
	if backend.peak != 4 {
		t.Errorf("at most %d launches at once, want the 4 workers", backend.peak)
	}
}

// TestFairAcrossWorkflows: a workflow with many ready activities does not
// crowd out one with few.
func TestFairAcrossWorkflows(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	launchtest.Start(t, st, launchtest.ManyActivities("big", 60, ""))
	small, _ := launchtest.Start(t, st, launchtest.ManyActivities("small", 3, ""))
	backend := &launchtest.Counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: backend}, MaxRunning: 6, Workers: 1})
	if n, err := l.Once(launchtest.Context(t)); n != 6 || err != nil {
		t.Fatalf("Once: %d, %v", n, err)
	}
	got := 0
	for k := range backend.Launches() {
		if k.WorkflowExecID == small {
			got++
		}
	}
	if got != 3 {
		t.Errorf("the small workflow got %d of the 6 launches, want its 3", got)
	}
}

// gauge is a backend that takes delay per launch and records the most
// launches it saw at once. Its first launches wait, for at most a minute
// in all, until there are until of them at once: how many overlap then
// does not depend on how fast a loaded machine makes the claims between
// them (a launcher that launches one at a time waits out the minute once,
// and shows 1).
type gauge struct {
	delay time.Duration
	until int
	mu    sync.Mutex
	now   int
	peak  int
	full  chan struct{} // closed once until launches were in at once, or the minute is over
	done  bool          // full is closed
}

func (g *gauge) Launch(ctx context.Context, j launcher.Job) (string, error) {
	g.mu.Lock()
	if g.full == nil {
		g.full = make(chan struct{})
	}
	g.now++
	g.peak = max(g.peak, g.now)
	if g.peak >= g.until {
		g.stopWaiting()
	}
	full := g.full
	g.mu.Unlock()
	select {
	case <-full:
	case <-ctx.Done():
	case <-time.After(time.Minute):
		g.mu.Lock()
		g.stopWaiting()
		g.mu.Unlock()
	}
	time.Sleep(g.delay)
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return "test:" + j.ActivityName, nil
}

// stopWaiting lets every launch go on without waiting; g.mu is held.
func (g *gauge) stopWaiting() {
	if !g.done {
		g.done = true
		close(g.full)
	}
}
