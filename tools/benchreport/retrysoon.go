package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// retrySoonCost is what a launcher's pass costs with retries due in
// seconds parked, how soon it launches an activity readied after them,
// and how long after its not_before a retry due soon starts.
type retrySoonCost struct {
	retries int
	delay   time.Duration
	dueIn   time.Duration // the soonest due, when the writes ended
	create  phase         // writing them
	// A pass that launches one activity and reads one window of retries
	// due, with none parked and with them all: the median of passRuns.
	calls [2]int
	units [2]float64
	took  [2]time.Duration
	// Launched tells whether the first pass after they were written
	// launched the activity readied behind them.
	launched bool
	// late: how long after its not_before each of started retries due soon
	// was launched by a running launcher, sorted.
	started int
	late    []time.Duration
}

// retrySoonStarted is how many retries due soon the lateness is measured on.
const retrySoonStarted = 200

func measureRetrySoon(ctx context.Context, endpoint string, retries int) (retrySoonCost, error) {
	// The longest delay still parked as due soon: writing the retries
	// may take most of it on a loaded machine.
	res := retrySoonCost{retries: retries, delay: 59 * time.Second, started: retrySoonStarted}
	var c counter
	prefix := "retrysoon_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: benchBackend{}}})
	launchable, _ := definition.Parse("bench.yaml", []byte("name: launchable\nactivities:\n  a: {command: [\"true\"]}\n"))
	if _, err := l.Once(ctx); err != nil { // its first pass reads the windows back
		return res, err
	}
	if err := soonPasses(ctx, st, l, &c, launchable, &res, 0); err != nil {
		return res, err
	}

	d, _ := definition.Parse("bench.yaml", []byte("name: retries\nactivities:\n  flaky: {command: [\"true\"], retry: {max_attempts: 3, interval: 59s}}\n"))
	wf, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	if _, err := l.Once(ctx); err != nil { // its first attempt
		return res, err
	}
	c.take("")
	began := time.Now()
	if err := writeSoonRetries(ctx, st, wf, 0, retries, res.delay); err != nil {
		return res, err
	}
	res.create = c.take("")
	// At the passes, the first written is due in dueIn, the last in
	// about the delay.
	res.dueIn = res.delay - time.Since(began)
	if res.dueIn < 15*time.Second {
		return res, fmt.Errorf("writing %d retries took %s: the first would be due before the passes are measured", retries, time.Since(began).Round(time.Second))
	}
	id, _, err := workflow.Start(ctx, st, launchable, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	if _, err := l.Once(ctx); err != nil {
		return res, err
	}
	a, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id})
	if err != nil {
		return res, err
	}
	res.launched = a.State != state.Ready
	if err := soonPasses(ctx, st, l, &c, launchable, &res, 1); err != nil {
		return res, err
	}

	// Lateness, on tables of its own: a launcher runs while retries due
	// in 10 s wait.
	return res, measureSoonLateness(ctx, endpoint, &res)
}

// soonPasses measures passRuns passes of l, each just after a window has
// ended, as a launcher's passes at its default interval read one window
// each, and each launching the one activity started before it.
func soonPasses(ctx context.Context, st *dynamodb.Store, l *launcher.Launcher, c *counter, launchable *definition.Workflow, res *retrySoonCost, i int) error {
	var times []time.Duration
	var calls []int
	var units []float64
	for range passRuns {
		if _, _, err := workflow.Start(ctx, st, launchable, workflow.StartOptions{}); err != nil {
			return err
		}
		next := state.WindowEnd(time.Now()).Add(state.RetryWindow + 10*time.Millisecond)
		time.Sleep(time.Until(next))
		c.take("")
		began := time.Now()
		n, err := l.Once(ctx)
		took := time.Since(began)
		p := c.take("")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("a pass launched %d activities, want the launchable one", n)
		}
		times, calls, units = append(times, took), append(calls, p.calls), append(units, p.read+p.write)
	}
	slices.Sort(times)
	slices.Sort(calls)
	slices.Sort(units)
	res.took[i], res.calls[i], res.units[i] = times[passRuns/2], calls[passRuns/2], units[passRuns/2]
	return nil
}

// writeSoonRetries writes n READY retries of flaky in wf, each due delay
// after it is written, as a retry policy writes them.
func writeSoonRetries(ctx context.Context, st *dynamodb.Store, wf string, tag, n int, delay time.Duration) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			at := state.Truncate(time.Now())
			a := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: fmt.Sprintf("flaky::00000000-0000-4000-8%03d-%012d", tag, i), WorkflowExecID: wf},
				WorkflowName: "retries", ActivityName: "flaky", State: state.Ready, StateTime: at, NotBefore: at.Add(delay), Attempt: 2, RetryOf: "flaky::" + wf}
			if err := st.CreateActivity(ctx, a); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

// timedLaunches is a backend that records when it launched each activity.
type timedLaunches struct {
	mu sync.Mutex
	at map[state.ActivityKey]time.Time
}

func (t *timedLaunches) Launch(_ context.Context, j launcher.Job) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.at[j.Key]; !ok {
		t.at[j.Key] = time.Now()
	}
	return "bench:" + j.ActivityName, nil
}

func measureSoonLateness(ctx context.Context, endpoint string, res *retrySoonCost) error {
	prefix := "retrysoon_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := st.Install(ctx, false); err != nil {
		return err
	}
	d, _ := definition.Parse("bench.yaml", []byte("name: retries\nactivities:\n  flaky: {command: [\"true\"], retry: {max_attempts: 3, interval: 10s}}\n"))
	wf, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return err
	}
	b := &timedLaunches{at: map[state.ActivityKey]time.Time{}}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: b}})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(rctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := writeSoonRetries(ctx, st, wf, 1, res.started, 10*time.Second); err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b.mu.Lock()
		n := len(b.at)
		b.mu.Unlock()
		if n > res.started { // and the first attempt
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after 2 minutes %d of %d retries due in 10 s were launched", n-1, res.started)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, at := range b.at {
		if !strings.HasPrefix(k.ActivityExecID, "flaky::00000000") {
			continue // the first attempt
		}
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			return err
		}
		res.late = append(res.late, at.Sub(a.NotBefore))
	}
	sort.Slice(res.late, func(i, j int) bool { return res.late[i] < res.late[j] })
	return nil
}

func writeRetrySoon(b *strings.Builder, r retrySoonCost) {
	fmt.Fprintf(b, "## Retries due soon: a pass with %d retries due within a minute\n\n", r.retries)
	fmt.Fprintf(b, "A retry with a delay from 5 s to a minute is written parked under the `SOON` shard of the window (1 s) of its `not_before` ([retries.md](docs/retries.md#how-it-holds-without-a-server), [contract](docs/contract.md#waiting-retries)); each launcher pass reads the windows that ended since its last one (%d queries of the state index a window, keys only) and puts back what they list. Writing %d retries each due %s after it was written: %.1f write units, %.2f a retry; when the writes ended, the first written was due in %s, the last in %s. A pass that launches one activity, just after a window ended, with no retry parked and with them all parked, not yet due (median of %d passes each, DynamoDB Local):\n\n",
		dynamodb.StateShards, r.retries, r.delay, r.create.write, r.create.write/float64(r.retries), r.dueIn.Round(time.Second), r.delay, passRuns)
	fmt.Fprintf(b, "| retries due within %s | store calls | capacity units | took |\n| ---: | ---: | ---: | ---: |\n", r.delay)
	fmt.Fprintf(b, "| 0 | %d | %.1f | %s |\n| %d | %d | %.1f | %s |\n\n", r.calls[0], r.units[0], r.took[0].Round(time.Millisecond), r.retries, r.calls[1], r.units[1], r.took[1].Round(time.Millisecond))
	first := "was"
	if !r.launched {
		first = "was **not**"
	}
	fmt.Fprintf(b, "An activity started behind the %d parked retries %s launched by the first pass. The retries cost a pass nothing more: the window it reads lists only retries that are due. The window's %d queries are what a pass pays for it, retries or none (a launcher's first pass reads 2 windows; a monitor's sweep reads 4 of them). DynamoDB Local reports no unit for a query that finds nothing; DynamoDB bills each query at least half a read unit (eventually consistent), so on DynamoDB a launcher at its default interval pays about %d read units a second more, and a monitor sweep about %d.\n\n",
		r.retries, first, dynamodb.StateShards, dynamodb.StateShards/2, 4*dynamodb.StateShards/2)
	if len(r.late) > 0 {
		q := func(p float64) time.Duration {
			return r.late[min(len(r.late)-1, int(p*float64(len(r.late))))].Round(time.Millisecond)
		}
		fmt.Fprintf(b, "How long after its `not_before` a retry due soon started, with one launcher running at its default interval (1 s), %d retries each due 10 s after it was written: p50 %s, p90 %s, max %s (the window's end, then the next pass; `scripts/dynamodb-local run -- go run ./tools/benchreport -retry-wait`).\n\n",
			len(r.late), q(0.5), q(0.9), r.late[len(r.late)-1].Round(time.Millisecond))
	}
}
