package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// --- for_each maps and static fan-outs at size (-foreach)

var (
	onlyForEach  = flag.Bool("foreach", false, "measure the for_each maps and static fan-outs on the embedded store and a for_each element's write units on DynamoDB Local only, and print their sections")
	mapSizes     = flag.String("foreach-sizes", "2500,10000", "elements of the for_each maps -foreach measures (the ratio is of the last to the first)")
	staticSizes  = flag.String("static-sizes", "500,2000", "dependents of the static fan-outs -foreach measures (the ratio is of the last to the first)")
	elementUnits = flag.Int("element-units", 300, "elements of the map (and dependents of the static fan-out) walked on DynamoDB Local for the write units")
)

// mapTargets are the goals of the fan-out section: the largest in at most
// a minute, and four times the work in at most 4.4 times the time.
const (
	fanTargetTime  = 60 * time.Second
	fanTargetRatio = 4.4
)

// sizeRun is one `whimbrel run` of a fan-out of some size.
type sizeRun struct {
	kind string // "map" or "static"
	n    int    // elements or dependents
	fanTiming
}

type forEachReport struct {
	runs []sizeRun
	// beside holds the maps run with the binaries of -before, each just
	// before the same map with those of -bin (empty without -before).
	beside []sizeRun
	before string
	units  elementReport
	load   [2]string // load averages at the start and the end
}

// sizes parses a comma-separated list of positive counts.
func sizes(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-%s %q: give positive counts separated by commas, such as 2500,10000", flagName, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// measureForEach runs the maps and the static fan-outs on the embedded
// store, each through `whimbrel run` in a fresh folder, the small ones of
// each kind first and one after the other, so that the ratios compare runs
// of the same minutes; then it walks a map's elements and a static
// fan-out's dependents through DynamoDB Local to count their write units.
func measureForEach(ctx context.Context, bin, before, endpoint string) (forEachReport, error) {
	defer superviseProcess()()
	r := forEachReport{before: before}
	maps, err := sizes("foreach-sizes", *mapSizes)
	if err != nil {
		return r, err
	}
	statics, err := sizes("static-sizes", *staticSizes)
	if err != nil {
		return r, err
	}
	// whimbrel run runs in a folder of its own: the binaries are named
	// from anywhere.
	if bin, err = filepath.Abs(bin); err != nil {
		return r, err
	}
	if before != "" {
		if before, err = filepath.Abs(before); err != nil {
			return r, err
		}
	}
	r.load[0] = loadAverage()
	for _, n := range maps {
		if before != "" {
			t, err := mapRun(before, n)
			if err != nil {
				return r, fmt.Errorf("for_each map of %d with %s: %w", n, before, err)
			}
			r.beside = append(r.beside, sizeRun{"map", n, t})
		}
		t, err := mapRun(bin, n)
		if err != nil {
			return r, fmt.Errorf("for_each map of %d: %w", n, err)
		}
		r.runs = append(r.runs, sizeRun{"map", n, t})
	}
	for _, n := range statics {
		t, err := fanOut(bin, "", "sqlite", n)
		if err != nil {
			return r, fmt.Errorf("static fan-out of %d: %w", n, err)
		}
		r.runs = append(r.runs, sizeRun{"static", n, t})
	}
	r.load[1] = loadAverage()
	if r.units, err = measureElementUnits(ctx, endpoint, *elementUnits); err != nil {
		return r, fmt.Errorf("write units of an element: %w", err)
	}
	return r, nil
}

// mapRun runs a for_each map of n `true` elements with `whimbrel run` on
// the embedded store in a fresh folder, as fanOut runs a static fan-out.
func mapRun(bin string, n int) (fanTiming, error) {
	dir, err := os.MkdirTemp("", "foreach")
	if err != nil {
		return fanTiming{}, err
	}
	defer os.RemoveAll(dir)
	def := fmt.Sprintf("name: foreach\nactivities:\n  m: {for_each: {count: %d}, max_items: %d, command: [\"true\"]}\n", n, max(n, 1))
	file := filepath.Join(dir, "foreach.yaml")
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		return fanTiming{}, err
	}
	cmd := exec.Command(filepath.Join(bin, "whimbrel"), "run", "--json", file)
	cmd.Dir = dir
	cmd.Env = withSupervise([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn"})
	if p := os.Getenv("WHIMBREL_CPUPROFILE"); p != "" {
		cmd.Env = append(cmd.Env, "WHIMBREL_CPUPROFILE="+p)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
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

// loadAverage is the machine's load averages over 1, 5 and 15 minutes, as
// /proc/loadavg says them, for the report: the machine is shared.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " / ")
	}
	return "unknown"
}

// ratioLine says time(big) ÷ time(small) for the runs of one kind, against
// the linear goal, and whether the largest took at most the goal's time.
func ratioLine(b *strings.Builder, kind, what string, runs []sizeRun) {
	var mine []sizeRun
	for _, r := range runs {
		if r.kind == kind {
			mine = append(mine, r)
		}
	}
	if len(mine) == 0 {
		return
	}
	small, big := mine[0], mine[len(mine)-1]
	verdict := func(ok bool) string {
		if ok {
			return "reached"
		}
		return "**not reached**"
	}
	fmt.Fprintf(b, "- %s: %d in %s (goal ≤ %.0f s: %s)", what, big.n, big.took.Round(100*time.Millisecond), fanTargetTime.Seconds(), verdict(big.took <= fanTargetTime))
	if big.n != small.n {
		tr := big.took.Seconds() / small.took.Seconds()
		cr := big.cpu.Seconds() / max(small.cpu.Seconds(), 1e-9)
		fmt.Fprintf(b, "; time(%d) ÷ time(%d) = **%.2f** for %.0f× the work (goal ≤ %.1f: %s), CPU %.2f",
			big.n, small.n, tr, float64(big.n)/float64(small.n), fanTargetRatio, verdict(tr <= fanTargetRatio), cr)
	}
	fmt.Fprintln(b)
}

func writeForEach(b *strings.Builder, r forEachReport) {
	fmt.Fprintf(b, "## for_each maps and static fan-outs at size\n\n")
	fmt.Fprintf(b, "Measured on %s by `go run ./tools/benchreport -foreach -bin bin` under `scripts/dynamodb-local run` (`make bench` measures it with the rest), load average %s at the start and %s at the end (1 / 5 / 15 minutes; the machine is shared).\n\n",
		time.Now().UTC().Format("2006-01-02"), r.load[0], r.load[1])
	fmt.Fprintf(b, "`whimbrel run --supervise process` (set through WHIMBREL_SUPERVISE: a whimbrel-run per activity, whatever the build's default) on the embedded store, in a fresh folder each, one after the other: a for_each map of n `true` elements (`for_each: {count: n}`, nothing else in the workflow), and a static fan-out of one root and n dependent `true` activities. CPU is user + system of `whimbrel run` and of every process it reaped (its wrappers and their commands).\n\n")
	fmt.Fprintf(b, "| workflow | activities | took | CPU | CPU per activity | activities per second |\n| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, x := range r.runs {
		what := "for_each map"
		if x.kind == "static" {
			what = "static fan-out"
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %.1fms | %.1f |\n", what, x.n, x.took.Round(100*time.Millisecond), x.cpu.Round(100*time.Millisecond),
			float64(x.cpu.Microseconds())/1000/float64(x.n), float64(x.n)/x.took.Seconds())
	}
	fmt.Fprintln(b)
	ratioLine(b, "map", "for_each map", r.runs)
	ratioLine(b, "static", "static fan-out", r.runs)
	fmt.Fprintln(b)
	if len(r.beside) > 0 {
		fmt.Fprintf(b, "## for_each maps, build beside build\n\n")
		fmt.Fprintf(b, "Measured on %s by `go run ./tools/benchreport -foreach -bin bin -before DIR` (DIR: `%s`): each for_each map (`for_each: {count: n}` of `true`, through `whimbrel run` on the embedded store) run with the binaries of DIR just before the same map with those of -bin, load average %s at the start and %s at the end:\n\n",
			time.Now().UTC().Format("2006-01-02"), r.before, r.load[0], r.load[1])
		fmt.Fprintf(b, "| binaries | elements | took | CPU | CPU per element |\n| --- | ---: | ---: | ---: | ---: |\n")
		for i, x := range r.beside {
			for _, y := range []struct {
				name string
				run  sizeRun
			}{{"before", x}, {"after", r.runs[i]}} {
				fmt.Fprintf(b, "| %s | %d | %s | %s | %.1fms |\n", y.name, y.run.n, y.run.took.Round(100*time.Millisecond), y.run.cpu.Round(100*time.Millisecond),
					float64(y.run.cpu.Microseconds())/1000/float64(y.run.n))
			}
		}
		fmt.Fprintln(b)
		ratioLine(b, "map", "before", r.beside)
		fmt.Fprintln(b)
	}
	writeElementUnits(b, r.units)
}

// errConflict reports whether err is DynamoDB refusing a conditional write.
func errConflict(err error) bool {
	var ccf interface{ ErrorCode() string }
	return errors.As(err, &ccf) && (ccf.ErrorCode() == "ConditionalCheckFailedException" || ccf.ErrorCode() == "TransactionCanceledException")
}

// printForEach measures and prints the for_each sections alone.
func printForEach(ctx context.Context, w *strings.Builder, bin, before, endpoint string) error {
	r, err := measureForEach(ctx, bin, before, endpoint)
	if err != nil {
		return err
	}
	writeForEach(w, r)
	return nil
}

// newPrefix is a fresh table prefix for one measurement.
func newPrefix(what string) string { return what + "_" + uuid.NewString()[:8] + "_" }
