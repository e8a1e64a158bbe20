package main

import (
	"context"
	"fmt"
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

// onlyPools measures the pools alone, printing their section.
var onlyPools bool

// poolCost is what a pool adds to an activity's life, and what a
// launcher's pass costs with activities waiting on a full pool.
type poolCost struct {
	plain, pooled phase // one activity's life, launched by a launcher
	waiters       int
	parkPasses    int   // the passes that parked the waiters
	parking       phase // their units
	// A pass that launches one activity, with no waiter and with the
	// waiters parked: the median of passRuns passes each.
	calls [2]int
	units [2]float64
	took  [2]time.Duration
}

// passRuns is how many passes each side of the comparison measures.
const passRuns = 5

// benchBackend launches nothing and says it did.
type benchBackend struct{}

func (benchBackend) Launch(_ context.Context, j launcher.Job) (string, error) {
	return "bench:" + j.ActivityName, nil
}

func measurePools(ctx context.Context, endpoint string, waiters int) (poolCost, error) {
	res := poolCost{waiters: waiters}
	var c counter
	prefix := "pools_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	backends := map[string]launcher.Backend{definition.LaunchLocal: benchBackend{}}
	// One activity's life: started, launched (a pooled one is met by a
	// pass, then let in by the next), claimed by its wrapper, completed
	// and advanced past (which gives its slot back).
	life := func(def string) (phase, error) {
		d, err := definition.Parse("bench.yaml", []byte(def))
		if err != nil {
			return phase{}, err
		}
		c.take("")
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			return phase{}, err
		}
		l := launcher.New(st, launcher.Config{Backends: backends})
		for i := 0; i < 3; i++ {
			if n, err := l.Once(ctx); err != nil {
				return phase{}, err
			} else if n > 0 {
				break
			}
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
		q, err := st.GetActivity(ctx, k)
		if err != nil || q.State != state.Queued {
			return phase{}, fmt.Errorf("the activity was not launched: %v %v", q, err)
		}
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o"}}); err != nil {
			return phase{}, err
		}
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "o", Exit: &state.Exit{}})
		if err != nil {
			return phase{}, err
		}
		if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
			return phase{}, err
		}
		return c.take(""), nil
	}
	if _, err := state.SetPool(ctx, st, "bench", 4, "", time.Now()); err != nil {
		return res, err
	}
	var err error
	if res.plain, err = life("name: plain\nactivities:\n  a: {command: [\"true\"]}\n"); err != nil {
		return res, err
	}
	if res.pooled, err = life("name: pooled\nactivities:\n  a: {pool: bench, command: [\"true\"]}\n"); err != nil {
		return res, err
	}

	// A pass that launches one activity, with nothing else READY.
	l := launcher.New(st, launcher.Config{Backends: backends})
	one := func(i int) error {
		d, _ := definition.Parse("bench.yaml", []byte("name: launchable\nactivities:\n  a: {command: [\"true\"]}\n"))
		var err error
		res.took[i], res.calls[i], res.units[i], err = medianPass(ctx, st, l, &c, d)
		return err
	}
	if err := one(0); err != nil {
		return res, err
	}

	// The waiters: a full pool of one, held by an activity elsewhere, and
	// waiters READY items of one workflow.
	if _, err := state.SetPool(ctx, st, "full", 1, "", time.Now()); err != nil {
		return res, err
	}
	now := state.Truncate(time.Now())
	if err := state.AcquireSlots(ctx, st, "full", state.PoolHolder{ActivityExecID: "elsewhere::1", WorkflowExecID: "elsewhere::1",
		Slots: 1, Since: now, LeaseUntil: now.Add(24 * time.Hour)}); err != nil {
		return res, err
	}
	d, _ := definition.Parse("bench.yaml", []byte("name: waiters\nactivities:\n  wait: {pool: full, command: [\"true\"]}\n"))
	wf, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	sem := make(chan struct{}, 16)
	for i := 1; i < waiters; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: fmt.Sprintf("wait::00000000-0000-4000-8000-%012d", i), WorkflowExecID: wf},
				WorkflowName: "waiters", ActivityName: "wait", State: state.Ready, StateTime: now.Add(time.Duration(i) * time.Millisecond), Attempt: 1}
			if err := st.CreateActivity(ctx, a); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return res, err
	}
	c.take("")
	for {
		if _, err := l.Once(ctx); err != nil {
			return res, err
		}
		res.parkPasses++
		refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Ready, Limit: 1})
		if err != nil {
			return res, err
		}
		if len(refs) == 0 {
			break
		}
		if res.parkPasses > 2*waiters/1000+4 {
			return res, fmt.Errorf("after %d passes the waiters are still in the READY listing", res.parkPasses)
		}
	}
	res.parking = c.take("")
	return res, one(1)
}

func writePools(b *strings.Builder, p poolCost) {
	fmt.Fprintf(b, "## Pools: the units a pooled activity adds, and a pass with %d activities waiting on a full pool\n\n", p.waiters)
	fmt.Fprintf(b, "One activity's life on DynamoDB Local: started, launched by a launcher's passes (a pooled one is met by one pass and let in by the next), claimed, completed and advanced past, without a pool and in a pool of 4 with room ([pools.md](docs/pools.md)):\n\n")
	fmt.Fprintf(b, "| | store calls | write units | read units |\n| --- | ---: | ---: | ---: |\n")
	fmt.Fprintf(b, "| plain activity | %d | %.1f | %.1f |\n| pooled activity | %d | %.1f | %.1f |\n\n",
		p.plain.calls, p.plain.write, p.plain.read, p.pooled.calls, p.pooled.write, p.pooled.read)
	fmt.Fprintf(b, "A pool adds %.1f write units (its slots taken, then given back: one shard item each) and %.1f read units (the pool's consistent reads, and the query of its parked waiters when the slots are given back), index writes included.\n\n",
		p.pooled.write-p.plain.write, p.pooled.read-p.plain.read)
	fmt.Fprintf(b, "%d activities then wait on a full pool: %d passes park them (%.1f write units, %.2f a waiter, once; %d store calls). A pass that launches one activity, with no waiter and with them all parked (median of %d passes each):\n\n",
		p.waiters, p.parkPasses, p.parking.write, p.parking.write/float64(p.waiters), p.parking.calls, passRuns)
	fmt.Fprintf(b, "| activities waiting on a full pool | store calls | capacity units | took |\n| ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(b, "| 0 | %d | %.1f | %s |\n| %d | %d | %.1f | %s |\n\n", p.calls[0], p.units[0], p.took[0].Round(time.Millisecond), p.waiters, p.calls[1], p.units[1], p.took[1].Round(time.Millisecond))
	ratio, of := p.units[1]/max(p.units[0], 0.5), "units"
	if p.units[0] == 0 && p.units[1] == 0 {
		ratio, of = float64(p.calls[1])/float64(max(p.calls[0], 1)), "store calls, the units being 0 both times"
	}
	fmt.Fprintf(b, "%.2f× the %s (target ≤ 1.1×), %.2f× the time: a parked waiter is out of the READY shards a pass reads, and costs the pass nothing until a slot is freed (`scripts/dynamodb-local run -- go run ./tools/benchreport -pools`).\n\n",
		ratio, of, float64(p.took[1])/float64(max(p.took[0], 1)))
}

// medianPass starts a workflow of one launchable activity before each of
// passRuns passes of l, and returns the median pass's time, store calls
// and capacity units (counted by c), each pass having launched it.
func medianPass(ctx context.Context, st workflow.Starter, l *launcher.Launcher, c *counter, launchable *definition.Workflow) (time.Duration, int, float64, error) {
	var times []time.Duration
	var calls []int
	var units []float64
	for range passRuns {
		if _, _, err := workflow.Start(ctx, st, launchable, workflow.StartOptions{}); err != nil {
			return 0, 0, 0, err
		}
		c.take("")
		began := time.Now()
		n, err := l.Once(ctx)
		took := time.Since(began)
		p := c.take("")
		if err != nil {
			return 0, 0, 0, err
		}
		if n != 1 {
			return 0, 0, 0, fmt.Errorf("a pass launched %d activities, want the launchable one", n)
		}
		times, calls, units = append(times, took), append(calls, p.calls), append(units, p.read+p.write)
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	sort.Ints(calls)
	sort.Float64s(units)
	return times[passRuns/2], calls[passRuns/2], units[passRuns/2], nil
}
