package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// onlyRetryWait measures the waiting retries alone, printing their section.
var onlyRetryWait = flag.Bool("retry-wait", false, "measure a launcher's pass with 10,000 retries waiting out their delay, and the monitor's sweep over them, only, and print their section")

// retryWaitCost is what a launcher's pass costs with retries waiting out
// their delay, and how soon it launches an activity readied after them.
type retryWaitCost struct {
	retries int
	create  phase // writing the waiting retries
	// A pass that launches one activity, with no retry waiting and with
	// them all waiting: the median of passRuns passes each.
	calls [2]int
	units [2]float64
	took  [2]time.Duration
	// firstLaunch is the time from a launchable activity's start to its
	// launch with the retries waiting, and passes the passes it took.
	firstLaunch time.Duration
	passes      int
	// The monitor's first sweep (which reads each waiting retry once) and
	// its second (which lists them only).
	sweeps [2]phase
}

func measureRetryWait(ctx context.Context, endpoint string, retries int) (retryWaitCost, error) {
	res := retryWaitCost{retries: retries}
	var c counter
	prefix := "retrywait_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return res, err
	}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: benchBackend{}}})
	launchable, _ := definition.Parse("bench.yaml", []byte("name: launchable\nactivities:\n  a: {command: [\"true\"]}\n"))
	pass := func(i int) error {
		var err error
		res.took[i], res.calls[i], res.units[i], err = medianPass(ctx, st, l, &c, launchable)
		return err
	}
	if err := pass(0); err != nil {
		return res, err
	}

	// The retries: READY items of one workflow, each due an hour after it
	// was written, as the retry of a policy with an interval of an hour.
	d, _ := definition.Parse("bench.yaml", []byte("name: retries\nactivities:\n  flaky: {command: [\"true\"], retry: {max_attempts: 3, interval: 1h}}\n"))
	wf, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	if _, err := l.Once(ctx); err != nil { // its first attempt
		return res, err
	}
	now := state.Truncate(time.Now())
	c.take("")
	var wg sync.WaitGroup
	errs := make(chan error, retries)
	sem := make(chan struct{}, 16)
	for i := range retries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			at := now.Add(time.Duration(i) * time.Millisecond)
			a := &state.ActivityExec{ActivityKey: state.ActivityKey{ActivityExecID: fmt.Sprintf("flaky::00000000-0000-4000-8000-%012d", i), WorkflowExecID: wf},
				WorkflowName: "retries", ActivityName: "flaky", State: state.Ready, StateTime: at, NotBefore: at.Add(time.Hour), Attempt: 2, RetryOf: "flaky::" + wf}
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
	res.create = c.take("")
	if err := pass(1); err != nil {
		return res, err
	}

	// The time to the first launch of an activity readied behind them.
	id, _, err := workflow.Start(ctx, st, launchable, workflow.StartOptions{})
	if err != nil {
		return res, err
	}
	began := time.Now()
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}
	for res.passes < 10 {
		if _, err := l.Once(ctx); err != nil {
			return res, err
		}
		res.passes++
		a, err := st.GetActivity(ctx, k)
		if err != nil {
			return res, err
		}
		if a.State != state.Ready {
			break
		}
	}
	res.firstLaunch = time.Since(began)

	m := monitor.New(st, monitor.Config{AdoptPages: -1})
	for i := range res.sweeps {
		c.take("")
		if _, err := m.Sweep(ctx); err != nil {
			return res, err
		}
		res.sweeps[i] = c.take("")
	}
	return res, nil
}

func writeRetryWait(b *strings.Builder, r retryWaitCost) {
	fmt.Fprintf(b, "## Waiting retries: a pass with %d retries waiting out their delay\n\n", r.retries)
	fmt.Fprintf(b, "%d READY retries, each due an hour after it was written, are written parked (`retry_wait`, [retries.md](docs/retries.md#how-it-holds-without-a-server)): %.1f write units, %.2f a retry, what any READY item's put and its index entry cost. A pass that launches one activity, with no retry waiting and with them all waiting (median of %d passes each, DynamoDB Local):\n\n",
		r.retries, r.create.write, r.create.write/float64(r.retries), passRuns)
	fmt.Fprintf(b, "| retries waiting | store calls | capacity units | took |\n| ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(b, "| 0 | %d | %.1f | %s |\n| %d | %d | %.1f | %s |\n\n", r.calls[0], r.units[0], r.took[0].Round(time.Millisecond), r.retries, r.calls[1], r.units[1], r.took[1].Round(time.Millisecond))
	ratio, of := r.units[1]/max(r.units[0], 0.5), "units"
	if r.units[0] == 0 && r.units[1] == 0 {
		ratio, of = float64(r.calls[1])/float64(max(r.calls[0], 1)), "store calls, the units being 0 both times"
	}
	fmt.Fprintf(b, "%.2f× the %s (target ≤ 1.1×), %.2f× the time. An activity started behind the %d waiting retries was launched by the first pass (%d pass, %s from its start to its launch).\n\n",
		ratio, of, float64(r.took[1])/float64(max(r.took[0], 1)), r.retries, r.passes, r.firstLaunch.Round(time.Millisecond))
	fmt.Fprintf(b, "The monitor's sweep lists the waiting retries, as it lists every READY activity, and reads each once, the first time it meets it, to learn its `not_before`: its first sweep over them took %d store calls (%.1f read units), its next %d (%.1f read units), the listings alone (DynamoDB Local charges about a unit for each index entry a query returns; as listing the same %d retries in the READY shards would). A parked retry is put back by the first sweep after its `not_before` and launched by the next pass (`scripts/dynamodb-local run -- go run ./tools/benchreport -retry-wait`).\n\n",
		r.sweeps[0].calls, r.sweeps[0].read, r.sweeps[1].calls, r.sweeps[1].read, r.retries)
}
