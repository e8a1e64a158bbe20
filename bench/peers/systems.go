package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// measure is what one run of one workload on one side gave.
type measure struct {
	wall     time.Duration
	cpu      time.Duration // every process of the side (for Whimbrel on DynamoDB, not the store's)
	storeCPU time.Duration // DynamoDB Local's JVM over the run, apart
	hops     []time.Duration
	mem      treeMemory // at the sample with the most activities running
	storeKB  int        // DynamoDB Local's JVM at that sample
	load     [2]float64 // the one-minute load average when it began and when it ended
}

// side is one system under measurement.
type side interface {
	name() string
	run(w work) (measure, error)
}

// --- Temporal: its dev server, and a worker process per run.

type temporalSide struct {
	server *temporalServer
	self   string // this program, which is also the worker
}

func (t *temporalSide) name() string { return "Temporal" }

func (t *temporalSide) run(w work) (measure, error) {
	var m measure
	before, err := cpuOf(t.server.pid())
	if err != nil {
		return m, err
	}
	cmd := exec.Command(t.self, "worker", "-address", t.server.address, "-kind", w.kind, "-n", strconv.Itoa(w.n), "-dir", w.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	m.load[0] = loadAverage()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("start the temporal worker: %w", err)
	}
	s := startSampler(w, 0, t.server.pid(), cmd.Process.Pid)
	err = cmd.Wait()
	m.wall = time.Since(began)
	m.mem, _ = s.stop()
	m.load[1] = loadAverage()
	if err != nil {
		return m, fmt.Errorf("temporal worker: %w: %s", err, tail(stderr.String()))
	}
	after, err := cpuOf(t.server.pid())
	if err != nil {
		return m, fmt.Errorf("the temporal server: %w", err)
	}
	m.cpu = rusageCPU(cmd) + after - before
	return m, nil
}

// --- Whimbrel: `whimbrel run` of the same DAG, on one store.

type whimbrelSide struct {
	bin      string // folder of the Whimbrel binaries
	store    string // "sqlite" or "dynamodb"
	endpoint string // DynamoDB Local's, for "dynamodb"
	storePID int    // DynamoDB Local's JVM, for "dynamodb"
	runs     int
}

func (s *whimbrelSide) name() string {
	if s.store == "dynamodb" {
		return "Whimbrel, DynamoDB Local"
	}
	return "Whimbrel, embedded store"
}

// env is the environment of every Whimbrel process of a run: a store of
// its own (a fresh SQLite file, or fresh tables under a new prefix).
func (s *whimbrelSide) env(dir string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn"}
	if s.store != "dynamodb" {
		return append(env, "WHIMBREL_STORE=sqlite:"+filepath.Join(dir, "state.db"))
	}
	s.runs++
	return append(env, "WHIMBREL_STORE=dynamodb", fmt.Sprintf("WHIMBREL_TABLE_PREFIX=peers%d_%d_", os.Getpid(), s.runs),
		"AWS_ENDPOINT_URL_DYNAMODB="+s.endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=whimbrel",
		"AWS_SECRET_ACCESS_KEY=whimbrel", "AWS_EC2_METADATA_DISABLED=true")
}

func (s *whimbrelSide) run(w work) (measure, error) {
	var m measure
	file := filepath.Join(w.dir, "peers.yaml")
	if err := os.WriteFile(file, []byte(definition(w)), 0o644); err != nil {
		return m, fmt.Errorf("write the definition: %w", err)
	}
	env := s.env(w.dir)
	whimbrel := filepath.Join(s.bin, "whimbrel")
	// The store is installed before the clock starts, as Temporal's
	// database is by the time its server answers.
	install := exec.Command(whimbrel, "install")
	install.Dir, install.Env = w.dir, env
	if out, err := install.CombinedOutput(); err != nil {
		return m, fmt.Errorf("whimbrel install on %s: %w: %s", s.store, err, tail(string(out)))
	}
	var before time.Duration
	if s.storePID != 0 {
		var err error
		if before, err = cpuOf(s.storePID); err != nil {
			return m, fmt.Errorf("DynamoDB Local: %w", err)
		}
	}
	cmd := exec.Command(whimbrel, "run", "--json", file)
	// A whimbrel-run per activity, as docs/benchmarks.md describes the
	// side, whatever the build's default (inline, for whimbrel run).
	cmd.Dir, cmd.Env = w.dir, append(env, "WHIMBREL_SUPERVISE=process")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	m.load[0] = loadAverage()
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("start whimbrel run: %w", err)
	}
	smp := startSampler(w, s.storePID, cmd.Process.Pid)
	err := cmd.Wait()
	m.wall = time.Since(began)
	m.mem, m.storeKB = smp.stop()
	m.load[1] = loadAverage()
	if err != nil {
		return m, fmt.Errorf("whimbrel run on %s: %w: %s", s.store, err, tail(stderr.String()))
	}
	m.cpu = rusageCPU(cmd)
	if s.storePID != 0 {
		after, err := cpuOf(s.storePID)
		if err != nil {
			return m, fmt.Errorf("DynamoDB Local: %w", err)
		}
		m.storeCPU = after - before
	}
	return m, nil
}

// dynamoDBLocalPID finds the JVM of the DynamoDB Local that answers on
// endpoint, as scripts/dynamodb-local starts it (-port PORT).
func dynamoDBLocalPID(endpoint string) (int, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Port() == "" {
		return 0, fmt.Errorf("find DynamoDB Local: endpoint %q has no port", endpoint)
	}
	pid := findProcess("DynamoDBLocal.jar", "-port", u.Port())
	if pid == 0 {
		return 0, fmt.Errorf("find DynamoDB Local: no process runs DynamoDBLocal.jar -port %s on this machine (start it with scripts/dynamodb-local run)", u.Port())
	}
	return pid, nil
}

// --- the memory sampler

// sampler reads, every 200 ms of a memory run, the resident memory of the
// side's processes, and keeps the sample that found the most activities'
// commands running (the first that found them all).
type sampler struct {
	quit chan struct{}
	wg   sync.WaitGroup
	best treeMemory
	kB   int
}

func startSampler(w work, storePID int, roots ...int) *sampler {
	s := &sampler{quit: make(chan struct{})}
	if w.kind != kindMemory {
		return s
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for s.best.leaves < w.n {
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
			m := memoryOfTrees(processes(), sleepCommand[0], roots...)
			if m.leaves > s.best.leaves {
				s.best = m
				if storePID != 0 {
					s.kB, _ = vmRSS(storePID)
				}
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the best sample.
func (s *sampler) stop() (treeMemory, int) {
	close(s.quit)
	s.wg.Wait()
	return s.best, s.kB
}

func tail(s string) string {
	if len(s) > 600 {
		return "…" + s[len(s)-600:]
	}
	return s
}
