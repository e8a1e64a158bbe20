package main

// Every performance target measured in one run, an earlier build (-before)
// beside the current one (-bin): CPU per activity, one launcher's
// throughput and the DAG hop on both stores, the wrapper's resident
// memory while heartbeating, the fan-outs through `whimbrel run`, and the
// write units per activity. Each build installs its own tables (its own
// `whimbrel install`, or the store its `whimbrel run` creates), fresh for
// each measurement, and starts its own workflows (its own `whimbrel
// start`): an earlier build need not read what this tree writes.
// benchreport only reads the workflow's item to see it end. Each build is
// passed only the flags it knows: the earlier one runs with its defaults.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

var (
	onlyTargets  = flag.Bool("targets", false, "measure every performance target with the binaries of -before (an earlier build, run with its default flags) beside those of -bin (with --supervise inline, and process), each build on tables its own whimbrel install made, and print the targets' section")
	targetsQuick = flag.Bool("targets-quick", false, "with -targets: small sizes and one round, for a trial run or a test")
	beforeRev    = flag.String("before-rev", "7eecfea", "with -targets: the commit -before was built from, as the report names it")
	fanRounds    = flag.Int("fan-rounds", 3, "with -targets: runs of each build at each size of the static fan-outs, the rounds one after the other (judged on the median of the rounds; -targets-quick: 1)")
)

// tbuild is one build as -targets runs it.
type tbuild struct {
	label string // as the report names it
	dir   string // its binaries
	// supervise is handed to its launchers and `whimbrel run` as
	// WHIMBREL_SUPERVISE; empty: nothing, the build's default.
	supervise string
}

// targetSizes are a -targets run's sizes.
type targetSizes struct {
	n, rounds           int             // ready activities of the engine's runs; runs of each build on each store
	fanRounds           int             // runs of each build at each size of the static fan-outs
	maps, statics       []int           // for_each elements and static dependents
	rssAt               []time.Duration // when the wrapper's memory is read
	quick               bool
	mapText, staticText string // the sizes as given, for the report
}

func newTargetSizes(trivial int) (targetSizes, error) {
	s := targetSizes{n: trivial, rounds: engineRounds, fanRounds: max(1, *fanRounds), rssAt: []time.Duration{3 * time.Second, 10 * time.Second, 30 * time.Second, 60 * time.Second},
		mapText: *mapSizes, staticText: *staticSizes}
	if *targetsQuick {
		s = targetSizes{n: 30, rounds: 1, fanRounds: 1, rssAt: []time.Duration{3 * time.Second, 10 * time.Second}, quick: true, mapText: "100,400", staticText: "50,200"}
	}
	var err error
	if s.maps, err = sizes("foreach-sizes", s.mapText); err != nil {
		return s, err
	}
	s.statics, err = sizes("static-sizes", s.staticText)
	return s, err
}

// printTargets measures every target and prints the section.
func printTargets(ctx context.Context, w io.Writer, bin, before, endpoint string, trivial int) error {
	if before == "" {
		return fmt.Errorf("-targets needs -before DIR: the binaries of the build the targets are measured against (make bench builds them)")
	}
	defer func() { supervise = "" }()
	var err error
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	if before, err = filepath.Abs(before); err != nil {
		return err
	}
	for _, dir := range []string{before, bin} {
		for _, name := range []string{"whimbrel", "whimbrel-launcher", "whimbrel-monitor", "whimbrel-run"} {
			if !fileExists(filepath.Join(dir, name)) {
				return fmt.Errorf("-targets: no %s in %s: give -bin and -before folders that hold a build's binaries (make native builds bin/, make bench-before the earlier build's)", name, dir)
			}
		}
	}
	sz, err := newTargetSizes(trivial)
	if err != nil {
		return err
	}
	r := targetResults{sizes: sz, before: before, after: bin, rev: *beforeRev, load0: loadAverage(), began: time.Now(),
		engine: map[string]map[string][]targetEngine{}, notes: map[string]string{}}
	old := tbuild{"before", before, ""}
	builds := []tbuild{old, {"after, --supervise inline", bin, "inline"}, {"after, --supervise process", bin, "process"}}
	r.builds = builds

	// The store's rate of conditional writes moves with the machine's
	// load: it is taken before and after the engine's runs, and the
	// higher is the store's bound.
	takeRaw := func() {
		raw, err := measureRawWrites(ctx, endpoint)
		if err != nil {
			r.notes["the store's rate of conditional writes"] = err.Error()
			return
		}
		r.rawEach = append(r.rawEach, raw)
		r.rawWrites = max(r.rawWrites, raw)
	}
	takeRaw()
	proxy, err := newCapProxy(endpoint)
	if err != nil {
		return err
	}
	defer proxy.close()
	for _, kind := range []string{"sqlite", "dynamodb"} {
		r.engine[kind] = map[string][]targetEngine{}
		for round := 0; round < sz.rounds; round++ {
			for _, b := range builds {
				var count *capProxy // the units are counted once for each build
				if kind == "dynamodb" && round == 0 {
					count = proxy
				}
				e, err := measureTargetEngine(ctx, b, kind, endpoint, count, sz.n)
				if err != nil {
					r.notes["engine "+kind+" "+b.label] = err.Error()
					fmt.Fprintf(os.Stderr, "benchreport: engine on %s with %s: %v\n", kind, b.label, err)
					continue
				}
				if e.unitsErr != nil {
					r.notes["units of "+b.label] = e.unitsErr.Error()
				}
				r.engine[kind][b.label] = append(r.engine[kind][b.label], e)
			}
		}
	}
	if r.units, err = measureUnits(ctx, endpoint); err != nil {
		r.notes["units"] = err.Error()
	}
	takeRaw()

	tmp, err := os.MkdirTemp("", "whimbrel-lean-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	leanBin, err := buildLean(tmp)
	if err != nil {
		return fmt.Errorf("build the container's whimbrel-run: %w", err)
	}
	r.rss = measureTargetRSS(ctx, before, bin, leanBin, endpoint, sz.rssAt)

	fanBuilds := []tbuild{{"before", before, ""}, {"after, default flags", bin, ""}, {"after, --supervise inline", bin, "inline"}, {"after, --supervise process", bin, "process"}}
	r.fanBuilds = fanBuilds
	for _, kind := range []string{"for_each map", "static fan-out"} {
		ns := sz.maps
		if kind == "static fan-out" {
			ns = sz.statics
		}
		// A static fan-out's runs are short (seconds), and this machine's
		// speed moves by half over minutes: each size is run in rounds,
		// and the ratio is taken within each round, whose runs are close
		// in time. A map of 10,000 runs for minutes.
		rounds := 1
		if kind == "static fan-out" {
			rounds = sz.fanRounds
		}
		for round := 0; round < rounds; round++ {
			for _, n := range ns {
				for _, b := range fanBuilds {
					f := targetFanRun(b, kind, n)
					f.round = round
					r.fans = append(r.fans, f)
				}
			}
		}
	}
	r.load1 = loadAverage()
	r.took = time.Since(r.began)
	writeTargets(w, r)
	return nil
}

// targetEngine is one build's engine run on one store.
type targetEngine struct {
	engineRun
	// The units per activity of a workflow of ready `true` activities,
	// its start included, as the proxy counted them (DynamoDB Local, the
	// first round only).
	writeUnits, readUnits float64
	counted               bool
	unitsErr              error // why they were not counted
}

// unitsActivities is the size of the workflow whose units are counted.
const unitsActivities = 50

// tstore is a fresh store made by a build's own `whimbrel install`.
type tstore struct {
	*engineStore
	kind, dir string
}

// newTargetStore has b install fresh tables on DynamoDB Local or a fresh
// embedded store, and opens them for benchreport's reads.
func newTargetStore(ctx context.Context, b tbuild, kind, endpoint string) (*tstore, error) {
	dir, err := os.MkdirTemp("", "targets")
	if err != nil {
		return nil, err
	}
	ts := &tstore{kind: kind, dir: dir, engineStore: &engineStore{close: func() { os.RemoveAll(dir) }}}
	if kind == "dynamodb" {
		prefix := newPrefix("tgt")
		ts.env = append(storeEnv(prefix, endpoint), "HOME="+dir)
		ts.st = dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
	} else {
		path := filepath.Join(dir, "state.db")
		ts.env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn", "WHIMBREL_STORE=sqlite:" + path}
	}
	if _, err := ts.cli(ctx, b, "install"); err != nil {
		ts.close()
		return nil, err
	}
	if kind == "sqlite" {
		path := filepath.Join(dir, "state.db")
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			ts.close()
			return nil, err
		}
		ts.st = st
		ts.close = func() { st.Close(); os.RemoveAll(dir) }
	}
	return ts, nil
}

// cli runs b's `whimbrel ARGS...` on the store and returns its stdout.
func (ts *tstore) cli(ctx context.Context, b tbuild, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(b.dir, "whimbrel"), args...)
	cmd.Env, cmd.Dir = ts.env, ts.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s whimbrel %s: %w: %s", b.label, strings.Join(args, " "), err, tail(errOut.String()))
	}
	return out.String(), nil
}

// start has b's `whimbrel start` start the workflow defined by yaml
// (detached on the embedded store, where it would otherwise run it) and
// returns its workflow_exec_id.
func (ts *tstore) start(ctx context.Context, b tbuild, yaml string) (string, error) {
	f, err := os.CreateTemp(ts.dir, "wf-*.yaml")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(yaml)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	args := []string{"start", f.Name()}
	if ts.kind == "sqlite" {
		args = []string{"start", "--detach", f.Name()}
	}
	out, err := ts.cli(ctx, b, args...)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.Contains(l, "::") && !strings.ContainsAny(l, " \t") {
			return l, nil
		}
	}
	return "", fmt.Errorf("%s whimbrel start printed no workflow_exec_id: %q", b.label, out)
}

// measureTargetEngine is measureEngine with b's own tables and workflows:
// n ready `true` activities through one launcher and one monitor of b,
// then a chain through a fresh launcher; with proxy, then a workflow of
// unitsActivities through a fresh launcher and monitor that reach the
// store through proxy, which counts its units. The timed runs go to the
// store directly: the proxy's work would slow them.
func measureTargetEngine(ctx context.Context, b tbuild, kind, endpoint string, proxy *capProxy, n int) (targetEngine, error) {
	var res targetEngine
	supervise = b.supervise
	ts, err := newTargetStore(ctx, b, kind, endpoint)
	if err != nil {
		return res, err
	}
	defer ts.close()
	logs := filepath.Join(ts.dir, "logs")
	l, err := startProc(b.dir, "whimbrel-launcher", ts.engineStore, "--log-dir", logs)
	if err != nil {
		return res, err
	}
	m, err := startProc(b.dir, "whimbrel-monitor", ts.engineStore)
	if err != nil {
		stopProc(l)
		return res, err
	}
	began := time.Now()
	id, err := ts.start(ctx, b, trueYAML("trivial", "t%04d", n))
	if err == nil {
		err = waitWorkflow(ctx, ts.engineStore, id)
	}
	took := time.Since(began)
	lc, lown := stopProc(l)
	mc, _ := stopProc(m)
	if err != nil {
		return res, err
	}
	res.perSecond = float64(n) / took.Seconds()
	res.cpu, res.launcher, res.monitor = (lc+mc)/time.Duration(n), lown/time.Duration(n), mc/time.Duration(n)

	hops := filepath.Join(ts.dir, "hops")
	if err := os.Mkdir(hops, 0o700); err != nil {
		return res, err
	}
	l, err = startProc(b.dir, "whimbrel-launcher", ts.engineStore, "--log-dir", logs)
	if err != nil {
		return res, err
	}
	id, err = ts.start(ctx, b, hopChain(hops))
	if err == nil {
		err = waitWorkflow(ctx, ts.engineStore, id)
	}
	stopProc(l)
	if err != nil {
		return res, fmt.Errorf("the chain: %w", err)
	}
	if res.hops, err = chainHops(hops); err != nil || proxy == nil {
		return res, err
	}
	// A count that fails leaves the timed figures standing.
	res.writeUnits, res.readUnits, res.unitsErr = countTargetUnits(ctx, b, ts, logs, proxy)
	res.counted = res.unitsErr == nil
	return res, nil
}

// countTargetUnits runs unitsActivities ready `true` activities through
// a fresh launcher and monitor of b on ts's tables, started by b's own
// `whimbrel start`, all of them reaching the store through proxy, and
// returns the write and read units per activity it counted.
func countTargetUnits(ctx context.Context, b tbuild, ts *tstore, logs string, proxy *capProxy) (write, read float64, err error) {
	prefix := ""
	for _, kv := range ts.env {
		if v, ok := strings.CutPrefix(kv, "WHIMBREL_TABLE_PREFIX="); ok {
			prefix = v
		}
	}
	via := *ts
	via.engineStore = &engineStore{env: append(storeEnv(prefix, proxy.url), "HOME="+ts.dir), st: ts.st, close: func() {}}
	l, err := startProc(b.dir, "whimbrel-launcher", via.engineStore, "--log-dir", logs)
	if err != nil {
		return 0, 0, err
	}
	m, err := startProc(b.dir, "whimbrel-monitor", via.engineStore)
	if err != nil {
		stopProc(l)
		return 0, 0, err
	}
	proxy.take()
	id, err := via.start(ctx, b, trueYAML("units", "u%04d", unitsActivities))
	if err == nil {
		err = waitWorkflow(ctx, via.engineStore, id)
	}
	stopProc(l)
	stopProc(m)
	w, r := proxy.take()
	if err != nil {
		return 0, 0, fmt.Errorf("the workflow whose units are counted: %w", err)
	}
	return w / unitsActivities, r / unitsActivities, nil
}

// targetRSS is one wrapper run whose memory is sampled.
type targetRSS struct {
	build, store string
	rss          []rss
	err          error
}

// measureTargetRSS runs, side by side, the wrapper of each build
// heartbeating every 200 ms on an activity its own build started: before's
// (its container image ran this same build) and the current container
// build on DynamoDB Local, and both native builds on the embedded store,
// and reads their resident memory at each of at.
func measureTargetRSS(ctx context.Context, before, bin, leanBin, endpoint string, at []time.Duration) []*targetRSS {
	type job struct {
		run    *targetRSS
		build  tbuild // whose install and start
		binary string
		kind   string
	}
	old, cur := tbuild{"before", before, ""}, tbuild{"after", bin, ""}
	jobs := []job{
		{&targetRSS{build: "before, whimbrel-run", store: "DynamoDB Local"}, old, filepath.Join(before, "whimbrel-run"), "dynamodb"},
		{&targetRSS{build: "after, container build (-tags " + containerTags + ")", store: "DynamoDB Local"}, cur, filepath.Join(leanBin, "whimbrel-run"), "dynamodb"},
		{&targetRSS{build: "after, native build", store: "DynamoDB Local"}, cur, filepath.Join(bin, "whimbrel-run"), "dynamodb"},
		{&targetRSS{build: "before, whimbrel-run", store: "sqlite"}, old, filepath.Join(before, "whimbrel-run"), "sqlite"},
		{&targetRSS{build: "after, native build", store: "sqlite"}, cur, filepath.Join(bin, "whimbrel-run"), "sqlite"},
	}
	last := at[len(at)-1]
	var wg sync.WaitGroup
	var runs []*targetRSS
	for _, j := range jobs {
		runs = append(runs, j.run)
		ts, err := newTargetStore(ctx, j.build, j.kind, endpoint)
		if err != nil {
			j.run.err = err
			continue
		}
		id, err := ts.start(ctx, j.build, "name: rss\nactivities:\n  a: {command: [\"true\"]}\n")
		if err != nil {
			j.run.err = err
			ts.close()
			continue
		}
		cmd := exec.Command(j.binary, "--heartbeat-interval", "200ms", "--heartbeat-timeout", "2s", "--", "sleep", fmt.Sprint((last + 2*time.Second).Seconds()))
		cmd.Env = append([]string{"WHIMBREL_ACTIVITY_EXEC_ID=" + state.ActivityExecIDFor(id, "a"), "WHIMBREL_WORKFLOW_EXEC_ID=" + id}, ts.env...)
		if err := cmd.Start(); err != nil {
			j.run.err = err
			ts.close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts.close()
			j.run.rss, j.run.err = sampleRSS(cmd, at)
			if err := cmd.ProcessState; j.run.err == nil && err != nil && !err.Success() {
				j.run.err = fmt.Errorf("whimbrel-run ended %s", err)
			}
		}()
	}
	wg.Wait()
	return runs
}

// targetFan is one fan-out through `whimbrel run`.
type targetFan struct {
	kind, build string
	n           int
	round       int // of the runs of its kind, build and size
	t           fanTiming
	absent      bool // the build has no for_each
	// ratio, when set, is the median of the rounds' ratios of the largest
	// size to the smallest, ratios all of them (fanRows).
	ratio      float64
	ratios     []float64
	failedRuns int // of the two sizes' runs, left out of the ratio
	err        error
}

// targetFanRun runs one fan-out with b's `whimbrel run` on the embedded
// store it creates in a fresh folder.
func targetFanRun(b tbuild, kind string, n int) targetFan {
	supervise = b.supervise
	f := targetFan{kind: kind, build: b.label, n: n}
	if kind == "for_each map" {
		f.t, f.err = mapRun(b.dir, n)
		if f.err != nil && strings.Contains(f.err.Error(), `unknown field "for_each"`) {
			f.absent, f.err = true, errors.New("no for_each in this build: its parser refuses the field")
		}
	} else {
		f.t, f.err = fanOut(b.dir, "", "sqlite", n)
	}
	return f
}
