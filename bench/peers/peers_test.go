package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseStatCountsFromTheLastParenthesis(t *testing.T) {
	// A command name may hold spaces and parentheses; the fields after it
	// are counted from the last closing parenthesis.
	line := "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 150 50 7 3 20 0 1 0 12345 1000000 200"
	s, err := parseStat(line)
	if err != nil {
		t.Fatal(err)
	}
	if s.comm != "a (b) c" || s.ppid != 17 {
		t.Errorf("comm %q, ppid %d: want \"a (b) c\", 17", s.comm, s.ppid)
	}
	if want := 210 * clockTick; s.cpu != want {
		t.Errorf("cpu %s, want %s (utime + stime + cutime + cstime)", s.cpu, want)
	}
	for _, bad := range []string{"", "4242 no parentheses", "4242 (x) S 1 2", "4242 (x) S one 1 1 0 -1 0 0 0 0 0 1 1 1 1"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) took a malformed line", bad)
		}
	}
}

func TestMemoryOfTreesLeavesOutTheCommands(t *testing.T) {
	// A real child: this process is the root, the sleep its leaf.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var m treeMemory
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m = memoryOfTrees(processes(), "sleep", os.Getpid()); m.leaves == 1 {
			break
		}
	}
	if m.leaves != 1 || m.procs != 1 {
		t.Fatalf("found %d leaves and %d other processes, want the sleep and this test", m.leaves, m.procs)
	}
	self, err := vmRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.kB < self/2 || m.kB > self*2 {
		t.Errorf("tree of %d kB, this process alone %d kB: the sleep is counted or this process is not", m.kB, self)
	}
	if m.pssKB <= 0 || m.pssKB > m.kB {
		t.Errorf("PSS %d kB of a tree of %d kB resident: want more than 0 and at most the resident", m.pssKB, m.kB)
	}
	// Its CPU as /proc says, and its pid found by its arguments.
	if _, err := cpuOf(cmd.Process.Pid); err != nil {
		t.Error(err)
	}
	if pid := findProcess("sleep", "30"); pid == 0 {
		t.Error("findProcess did not find sleep 30")
	}
	if pid := findProcess("sleep", "no-such-argument-anywhere"); pid != 0 {
		t.Errorf("findProcess found %d for an argument nobody has", pid)
	}
}

func TestChainStepsAndHopsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	steps := chainSteps(dir, 3)
	for _, argv := range steps {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	hops, err := readHops(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 2 {
		t.Fatalf("%d hops, want 2", len(hops))
	}
	for _, h := range hops {
		if h < 0 || h > time.Minute {
			t.Errorf("hop %s: the times are not read as Unix nanoseconds", h)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "s01.start"), []byte("<script>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readHops(dir, 3); err == nil || !strings.Contains(err.Error(), "s01.start") {
		t.Errorf("a malformed time: %v, want an error naming its file", err)
	}
}

func TestDefinitionIsTheSameDAG(t *testing.T) {
	fan := definition(work{kind: kindFan, n: 3})
	if strings.Count(fan, "depends_on: [root]") != 3 || !strings.Contains(fan, "  root: {command: [\"true\"]}\n") {
		t.Errorf("fan-out of 3:\n%s", fan)
	}
	chain := definition(work{kind: kindChain, n: 3, dir: "/tmp/x"})
	if strings.Count(chain, "depends_on:") != 2 || !strings.Contains(chain, `"date +%s%N > /tmp/x/s02.start; date +%s%N > /tmp/x/s02.end"`) {
		t.Errorf("chain of 3:\n%s", chain)
	}
	mem := definition(work{kind: kindMemory, n: 2})
	if strings.Count(mem, `command: [sleep, "30"]`) != 2 || strings.Contains(mem, "depends_on") {
		t.Errorf("memory of 2:\n%s", mem)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 50); p != 10*time.Millisecond {
		t.Errorf("p50 %s, want 10ms", p)
	}
	if p := percentile(ds, 95); p != 19*time.Millisecond {
		t.Errorf("p95 %s, want 19ms", p)
	}
	if percentile(nil, 50) != 0 {
		t.Error("p50 of nothing is not 0")
	}
}

func TestOptionsRefuseBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "125,x"}, {"-sizes", "0"}, {"-stores", "postgres"}, {"-rounds", "0"}, {"-chain", "1"}, {"stray"},
	} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("%q taken", args)
		}
		if code := benchMain(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)", args, code)
		}
	}
	o, err := parseOptions([]string{"-sizes", "5, 7", "-stores", "sqlite"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.sizes) != 2 || o.sizes[1] != 7 || len(o.stores) != 1 || o.rounds != 1 || !filepath.IsAbs(o.bin) {
		t.Errorf("options %+v", o)
	}
}

func TestReportTable(t *testing.T) {
	tm := &temporalSide{}
	wl := &whimbrelSide{store: "sqlite"}
	wd := &whimbrelSide{store: "dynamodb"}
	fan := work{kind: kindFan, n: 99}
	chain := work{kind: kindChain, n: 3}
	mem := work{kind: kindMemory, n: 2}
	r := report{sides: []side{tm, wl, wd}, works: []work{fan, chain, mem}, results: map[string]map[string][]measure{}, rounds: 1, command: "make bench-peers"}
	r.add(fan, tm, measure{wall: 2 * time.Second, cpu: time.Second, load: [2]float64{3, 5}})
	r.add(fan, wl, measure{wall: time.Second, cpu: 2 * time.Second, load: [2]float64{5, 6}})
	r.add(fan, wd, measure{wall: 4 * time.Second, cpu: 3 * time.Second, storeCPU: time.Second, load: [2]float64{6, 2}})
	r.add(chain, tm, measure{hops: []time.Duration{time.Millisecond, 3 * time.Millisecond}})
	r.add(mem, tm, measure{mem: treeMemory{kB: 2048, pssKB: 1024, procs: 2, leaves: 2}})
	r.add(mem, wd, measure{mem: treeMemory{kB: 4096, pssKB: 3072, procs: 3, leaves: 1}, storeKB: 1024})
	got := r.markdown()
	for _, want := range []string{
		"| measure | Temporal (dev server + worker) | Whimbrel, embedded store | Whimbrel, DynamoDB Local |",
		"| fan-out of 99: wall time | 2.0 s | 1.0 s | 4.0 s |",
		"| fan-out of 99: CPU per activity | 10.0 ms | 20.0 ms | 30.0 ms (+ 10.0 ms DynamoDB Local) |",
		"| chain of 3: hop p50 / p95 | 1.0 ms / 1.0 ms | – | – |",
		"| 2 running: resident memory, VmRSS (PSS) | 2 MB (PSS 1 MB) in 2 processes | – | 4 MB (PSS 3 MB) in 3 processes (+ 1 MB DynamoDB Local) (only 1 of 2 running at once) |",
		"| load average during its runs | 0.0–5.0 | 5.0–6.0 | 0.0–6.0 |",
		"load average was 0.0 to 6.0",
		"- Whimbrel, embedded store ÷ Temporal, fan-out of 99: wall 0.50×, CPU 2.00×\n",
		"- Whimbrel, DynamoDB Local ÷ Temporal, fan-out of 99: wall 2.00×, CPU 3.00× (DynamoDB Local's CPU not counted)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
}
