package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// --- fan-out and throughput against the store's bound

// fanSizes are the fan-outs measured: one root and that many dependent
// `true` activities.
var fanSizes = []int{500, 2000}

// writesPerActivity is the write units of one activity's life
// (as BENCHMARKS.md counts it, measured in the same run by make bench); with the writes per
// second the store sustains it bounds the activities per second.
var writesPerActivity = 14.0

type fanTiming struct {
	took time.Duration
	cpu  time.Duration // whimbrel run and every process it waited for
}

type speedReport struct {
	fan map[string]map[int]fanTiming // by store, by dependents
	tp  throughput
}

// measureSpeed runs the fan-outs on both stores through `whimbrel run`,
// and the throughput (measureThroughput's method) unless tp is given.
func measureSpeed(ctx context.Context, bin, endpoint string, trivial int, tp *throughput) (speedReport, error) {
	defer superviseProcess()()
	res := speedReport{fan: map[string]map[int]fanTiming{}}
	for _, store := range []string{"sqlite", "dynamodb"} {
		res.fan[store] = map[int]fanTiming{}
		for _, n := range fanSizes {
			t, err := fanOut(bin, endpoint, store, n)
			if err != nil {
				return res, fmt.Errorf("fan-out of %d on %s: %w", n, store, err)
			}
			res.fan[store][n] = t
		}
	}
	if tp != nil {
		res.tp = *tp
		return res, nil
	}
	var err error
	res.tp, err = measureThroughput(ctx, bin, endpoint, trivial)
	return res, err
}

// fanOut runs one root and n dependents with `whimbrel run` in a fresh
// folder (the embedded store .whimbrel/state.db there, as a new user's
// first run) or on fresh DynamoDB Local tables.
func fanOut(bin, endpoint, store string, n int) (fanTiming, error) {
	dir, err := os.MkdirTemp("", "fanout")
	if err != nil {
		return fanTiming{}, err
	}
	defer os.RemoveAll(dir)
	var def strings.Builder
	def.WriteString("name: fanout\nactivities:\n  root: {command: [\"true\"]}\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&def, "  d%04d: {command: [\"true\"], depends_on: [root]}\n", i)
	}
	file := filepath.Join(dir, "fanout.yaml")
	if err := os.WriteFile(file, []byte(def.String()), 0o644); err != nil {
		return fanTiming{}, err
	}
	cmd := exec.Command(filepath.Join(bin, "whimbrel"), "run", "--json", file)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn"}
	if store == "dynamodb" {
		cmd.Env = storeEnv("fan_"+uuid.NewString()[:8]+"_", endpoint)
	}
	cmd.Env = withSupervise(cmd.Env)
	if p := os.Getenv("WHIMBREL_CPUPROFILE"); p != "" {
		cmd.Env = append(cmd.Env, "WHIMBREL_CPUPROFILE="+p)
	}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		return fanTiming{}, fmt.Errorf("%w: %s", err, tail(stderr.String()))
	}
	t := fanTiming{took: time.Since(began)}
	// wait4's usage of whimbrel run includes the wrappers it reaped.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		t.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return t, nil
}

// onlyFan measures and prints the embedded store's fan-outs only.
var onlyFan bool

// printFanBuilds runs the embedded store's fan-outs with the binaries of
// before (if given) and of bin, alternating, and prints them side by side.
func printFanBuilds(w io.Writer, bin, before string) error {
	defer superviseProcess()()
	builds := []string{bin}
	if before != "" {
		builds = []string{before, bin}
	}
	got := map[string]map[int]fanTiming{}
	for _, n := range fanSizes {
		for _, b := range builds {
			t, err := fanOut(b, "", "sqlite", n)
			if err != nil {
				return fmt.Errorf("fan-out of %d with %s: %w", n, b, err)
			}
			if got[b] == nil {
				got[b] = map[int]fanTiming{}
			}
			got[b][n] = t
		}
	}
	fmt.Fprintf(w, "## Fan-out on the embedded store, build beside build\n\n`whimbrel run` with `--supervise process` (WHIMBREL_SUPERVISE), a whimbrel-run per activity, with each build's binaries.\n\n| binaries | dependents | took | CPU |\n| --- | ---: | ---: | ---: |\n")
	for _, b := range builds {
		for _, n := range fanSizes {
			fmt.Fprintf(w, "| %s | %d | %s | %s |\n", b, n, got[b][n].took.Round(100*time.Millisecond), got[b][n].cpu.Round(100*time.Millisecond))
		}
	}
	small, big := fanSizes[0], fanSizes[len(fanSizes)-1]
	fmt.Fprintln(w)
	for _, b := range builds {
		s, l := got[b][small], got[b][big]
		fmt.Fprintf(w, "- %s: time(%d) ÷ time(%d) = %.2f (linear is ≤ 4.4), CPU %.2f\n", b, big, small,
			l.took.Seconds()/s.took.Seconds(), l.cpu.Seconds()/max(s.cpu.Seconds(), 1e-9))
	}
	fmt.Fprintln(w)
	return nil
}

// onlyThroughput measures and prints the throughput of one or two builds.
var onlyThroughput bool

// printThroughputBuilds measures the throughput with the binaries of before
// (if given) and of bin, alternating three times, and prints each run: the
// activities per second, and the CPU per activity of the launchers and all
// they started, beside the store's raw rate of the same run.
func printThroughputBuilds(ctx context.Context, w io.Writer, bin, before, endpoint string, trivial int) error {
	builds := []string{bin}
	if before != "" {
		builds = []string{before, bin}
	}
	fmt.Fprintf(w, "## Throughput, build beside build\n\n| binaries | run | launchers | activities per second | CPU per activity | store's conditional writes per second |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for run := 1; run <= 3; run++ {
		for _, b := range builds {
			tp, err := measureThroughput(ctx, b, endpoint, trivial)
			if err != nil {
				return fmt.Errorf("throughput with %s: %w", b, err)
			}
			for _, l := range []int{1, 4} {
				fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.1fms | %.0f |\n", b, run, l, tp.perSecond[l],
					float64(tp.cpu[l].Microseconds())/1000, tp.writes)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// tail is the end of a failed command's stderr and, when the command
// crashed, the start of its crash report too (the panic or fatal error
// and the top of its stack), which the end of a long report leaves out.
func tail(s string) string {
	if len(s) <= 400 {
		return s
	}
	end := len(s) - 400
	for _, mark := range []string{"panic: ", "fatal error: ", "SIGQUIT: ", "SIGABRT: "} {
		if i := strings.Index(s, mark); i >= 0 && i < end {
			return s[i:min(end, i+2000)] + "\n…" + s[end:]
		}
	}
	return "…" + s[end:]
}

func writeSpeed(b *strings.Builder, r speedReport, trivial int) {
	fmt.Fprintf(b, "## Fan-out\n\n`whimbrel run` of one root and n dependent `true` activities (every process on this machine: the run, its launcher and monitor, one whimbrel-run per activity: `--supervise process`, set through WHIMBREL_SUPERVISE, as `whimbrel run` ran them before it supervised inline by default); CPU is user + system of all of them. Goal: 2,000 in ≤ 60 s on the embedded store, and time(2,000) ≤ 4.4 × time(500). Alone: `scripts/dynamodb-local run -- go run ./tools/benchreport -speed`.\n\n")
	fmt.Fprintf(b, "| store | dependents | took | CPU | activities per second |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, store := range []string{"sqlite", "dynamodb"} {
		for _, n := range fanSizes {
			t := r.fan[store][n]
			fmt.Fprintf(b, "| %s | %d | %s | %s | %.1f |\n", store, n, t.took.Round(100*time.Millisecond), t.cpu.Round(100*time.Millisecond), float64(n+1)/t.took.Seconds())
		}
	}
	fmt.Fprintf(b, "\n")
	small, big := fanSizes[0], fanSizes[len(fanSizes)-1]
	for _, store := range []string{"sqlite", "dynamodb"} {
		s, l := r.fan[store][small], r.fan[store][big]
		fmt.Fprintf(b, "- %s: time(%d) ÷ time(%d) = %.2f (%.0f× the work; linear is ≤ 4.4), CPU %.2f\n", store, big, small,
			l.took.Seconds()/s.took.Seconds(), float64(big)/float64(small), l.cpu.Seconds()/max(s.cpu.Seconds(), 1e-9))
	}
	bound := r.tp.writes / writesPerActivity
	fmt.Fprintf(b, "\n## Throughput against the store's bound\n\n%d trivial activities through whimbrel-launcher (local backend), as in Throughput; the store's bound is the conditional writes per second DynamoDB Local sustained in the same run (%.0f) ÷ %.0f writes per activity = %.1f activities per second. Goal: ≥ 0.8.\n\n", trivial, r.tp.writes, writesPerActivity, bound)
	fmt.Fprintf(b, "| launchers | activities per second | ÷ store bound |\n| ---: | ---: | ---: |\n")
	for _, l := range []int{1, 4} {
		fmt.Fprintf(b, "| %d | %.1f | %.2f |\n", l, r.tp.perSecond[l], r.tp.perSecond[l]/bound)
	}
	fmt.Fprintf(b, "\n")
}

// onlyLocalRSS measures and prints the memory of running local activities.
var onlyLocalRSS bool

// localRSSActivities is how many activities of `sleep` run at once in the
// measurement of their memory.
const localRSSActivities = 10

// printLocalRSS runs localRSSActivities activities of `sleep 4` at once
// through `whimbrel run` on the embedded store with the binaries of before
// (if given) and of bin, twice each, alternating, and prints the VmRSS of
// their wrappers and of the wrappers' guard processes 2.5 s in.
func printLocalRSS(w io.Writer, bin, before string) error {
	builds := []string{bin}
	if before != "" {
		builds = []string{before, bin}
	}
	fmt.Fprintf(w, "## Memory of running local activities, build beside build\n\n`whimbrel run --supervise process` (WHIMBREL_SUPERVISE): the wrappers measured are a whimbrel-run per activity.\n\n| binaries | run | wrappers | their VmRSS | guard processes | their VmRSS | per running activity |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for run := 1; run <= 2; run++ {
		for _, b := range builds {
			m, err := localRSS(b)
			if err != nil {
				return fmt.Errorf("memory of local activities with %s: %w", b, err)
			}
			fmt.Fprintf(w, "| %s | %d | %d | %.1f MB | %d | %.1f MB | %.1f MB |\n", b, run, m.wrappers, float64(m.wrapperKB)/1024,
				m.guards, float64(m.guardKB)/1024, float64(m.wrapperKB+m.guardKB)/1024/float64(max(m.wrappers, 1)))
		}
	}
	fmt.Fprintln(w)
	return nil
}

type localMemory struct {
	wrappers, guards   int
	wrapperKB, guardKB int
}

func localRSS(bin string) (localMemory, error) {
	// whimbrel run runs in a folder of its own: the binaries are named
	// from anywhere.
	bin, err := filepath.Abs(bin)
	if err != nil {
		return localMemory{}, err
	}
	var m localMemory
	dir, err := os.MkdirTemp("", "localrss")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(dir)
	var def strings.Builder
	def.WriteString("name: rss\nactivities:\n")
	for i := 0; i < localRSSActivities; i++ {
		fmt.Fprintf(&def, "  s%d: {command: [sleep, \"4\"]}\n", i)
	}
	file := filepath.Join(dir, "rss.yaml")
	if err := os.WriteFile(file, []byte(def.String()), 0o644); err != nil {
		return m, err
	}
	cmd := exec.Command(filepath.Join(bin, "whimbrel"), "run", "--json", file)
	cmd.Dir = dir
	// The wrappers are what is measured: a whimbrel-run process each,
	// not the default's supervision inline.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn", "WHIMBREL_SUPERVISE=process"}
	if err := cmd.Start(); err != nil {
		return m, err
	}
	time.Sleep(2500 * time.Millisecond)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		arg0, _, _ := strings.Cut(string(argv), "\x00")
		isGuard, isWrapper := arg0 == "whimbrel-runner-guard", arg0 == filepath.Join(bin, "whimbrel-run")
		if !isGuard && !isWrapper {
			continue
		}
		kb, err := vmRSS(pid)
		if err != nil {
			continue
		}
		if isGuard {
			m.guards, m.guardKB = m.guards+1, m.guardKB+kb
		} else {
			m.wrappers, m.wrapperKB = m.wrappers+1, m.wrapperKB+kb
		}
	}
	if err := cmd.Wait(); err != nil {
		return m, fmt.Errorf("whimbrel run: %w", err)
	}
	if m.wrappers != localRSSActivities {
		return m, fmt.Errorf("found %d wrappers running, want %d", m.wrappers, localRSSActivities)
	}
	return m, nil
}
