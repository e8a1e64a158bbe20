package main

// Local activities supervised inline (`--supervise inline`: the launcher
// runs each activity's wrapper on a goroutine of its own process and
// starts only the command) beside a whimbrel-run process each
// (`--supervise process`), with the same binaries in one run: the
// engine's figures on both stores, and the for_each maps and static
// fan-outs on the embedded store.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

var (
	onlyInline    = flag.Bool("inline", false, "measure the engine (CPU per activity, one launcher's throughput, the DAG hop) on both stores and the for_each maps and static fan-outs on the embedded store, with local activities supervised by a whimbrel-run process each and inline in the launcher, alternating, with the binaries of -bin, and print their section")
	inlineFanouts = flag.Bool("inline-fanouts", true, "with -inline, also run the for_each maps (-foreach-sizes) and static fan-outs (-static-sizes) in both modes")
	inlineEngine  = flag.Bool("inline-engine", true, "with -inline, also measure the engine (150 activities, a chain) on both stores; false: only the for_each maps and static fan-outs, in a section of their own, with no DynamoDB Local")
)

// supervise, when set, is handed to every launcher and `whimbrel run`
// benchreport starts (WHIMBREL_SUPERVISE); empty: their default.
var supervise string

// superviseModes are the modes -inline compares, today's first.
var superviseModes = []string{"process", "inline"}

// superviseProcess makes the runs of a mode that measures a whimbrel-run
// process per activity supervise them so, whatever the binaries' default
// (`whimbrel run` supervises inline by default), so that build beside
// build compares like with like; a mode set already (-inline) is kept.
// The returned function puts the default back.
func superviseProcess() (restore func()) {
	if supervise != "" {
		return func() {}
	}
	supervise = "process"
	return func() { supervise = "" }
}

// withSupervise adds the supervision mode to a process's environment.
func withSupervise(env []string) []string {
	if supervise == "" {
		return env
	}
	return append(env, "WHIMBREL_SUPERVISE="+supervise)
}

// Targets of the per-activity cost (the figures the engine is held to).
const (
	targetCPU       = 7 * time.Millisecond
	targetHopSQLite = 10 * time.Millisecond
	targetHopDynamo = 30 * time.Millisecond
)

// printInline measures bin's engine in both modes on both stores,
// alternating, engineRounds times, then the fan-outs in both modes, and
// prints the section.
func printInline(ctx context.Context, w io.Writer, bin, endpoint string, n int) error {
	defer func() { supervise = "" }()
	load0 := loadAverage()
	got := map[string]map[string][]engineRun{} // by store, by mode
	for _, kind := range []string{"sqlite", "dynamodb"} {
		if !*inlineEngine {
			break
		}
		got[kind] = map[string][]engineRun{}
		for round := 0; round < engineRounds; round++ {
			for _, mode := range superviseModes {
				supervise = mode
				r, err := measureEngine(ctx, bin, kind, endpoint, n)
				if err != nil {
					return fmt.Errorf("engine on %s supervised %s: %w", kind, mode, err)
				}
				sort.Slice(r.hops, func(i, j int) bool { return r.hops[i] < r.hops[j] })
				got[kind][mode] = append(got[kind][mode], r)
			}
		}
	}
	var fans []inlineFan
	if *inlineFanouts {
		maps, err := sizes("foreach-sizes", *mapSizes)
		if err != nil {
			return err
		}
		statics, err := sizes("static-sizes", *staticSizes)
		if err != nil {
			return err
		}
		abs, err := filepath.Abs(bin) // whimbrel run runs in a folder of its own
		if err != nil {
			return err
		}
		for _, n := range maps {
			for _, mode := range superviseModes {
				supervise = mode
				t, err := mapRun(abs, n)
				fans = append(fans, inlineFan{"for_each map", mode, n, t, err})
			}
		}
		for _, n := range statics {
			for _, mode := range superviseModes {
				supervise = mode
				t, err := fanOut(abs, "", "sqlite", n)
				fans = append(fans, inlineFan{"static fan-out", mode, n, t, err})
			}
		}
	}

	if *inlineEngine {
		printInlineEngine(w, got, load0, n)
	} else {
		fmt.Fprintf(w, "## Local activities supervised inline: for_each maps and static fan-outs at size\n\n")
		fmt.Fprintf(w, "Measured on %s by `go run ./tools/benchreport -inline -inline-engine=false -bin bin -foreach-sizes %s -static-sizes %s` (the same binaries, `--supervise process` and `--supervise inline` alternating; load average %s at the start, %s at the end: the machine is shared).\n\n",
			time.Now().UTC().Format("2006-01-02"), *mapSizes, *staticSizes, load0, loadAverage())
	}
	printInlineFans(w, fans)
	return nil
}

// printInlineEngine prints the engine's part of the section: its heading,
// the runs of each mode on each store, and the targets.
func printInlineEngine(w io.Writer, got map[string]map[string][]engineRun, load0 string, n int) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "## Local activities supervised inline beside a wrapper process each\n\n")
	fmt.Fprintf(w, "Measured on %s by `scripts/dynamodb-local run -- go run ./tools/benchreport -inline -bin bin` (the same binaries, `--supervise process` and `--supervise inline` alternating, each %d times on each store; load average %s at the start, %s at the end: the machine is shared). %d ready `true` activities through one `whimbrel-launcher` (`--log-dir`) with one `whimbrel-monitor` beside it; CPU is user + system of the launcher, every process it reaped and the monitor, per activity. Then a chain of %d activities through a fresh launcher on the same store: the hop is a command's start after its upstream's end. With `inline` there is no `whimbrel-run` process: the launcher's own process does the wrappers' work, and starts the commands and one guard process.\n\n",
		time.Now().UTC().Format("2006-01-02"), engineRounds, load0, loadAverage(), n, engineChain)
	fmt.Fprintf(w, "| store | supervise | activities per second | CPU per activity | of it the launcher's own process | the monitor's | the wrappers (process) and commands | hop p50 | hop p95 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, kind := range []string{"sqlite", "dynamodb"} {
		for _, mode := range superviseModes {
			for _, r := range got[kind][mode] {
				fmt.Fprintf(w, "| %s | %s | %.1f | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms |\n", kind, mode, r.perSecond, ms(r.cpu), ms(r.launcher), ms(r.monitor),
					ms(r.cpu-r.launcher-r.monitor), ms(r.hops[len(r.hops)/2]), ms(r.hops[len(r.hops)*95/100]))
			}
		}
	}
	fmt.Fprintln(w)
	best := func(kind, mode string) (tp float64, cpu, hop time.Duration) {
		for i, r := range got[kind][mode] {
			p50 := r.hops[len(r.hops)/2]
			if i == 0 || r.perSecond > tp {
				tp = r.perSecond
			}
			if i == 0 || r.cpu < cpu {
				cpu = r.cpu
			}
			if i == 0 || p50 < hop {
				hop = p50
			}
		}
		return
	}
	fmt.Fprintf(w, "Targets, best of the runs of each mode:\n\n")
	for _, kind := range []string{"sqlite", "dynamodb"} {
		ptp, pcpu, phop := best(kind, "process")
		itp, icpu, ihop := best(kind, "inline")
		hopTarget := targetHopSQLite
		if kind == "dynamodb" {
			hopTarget = targetHopDynamo
		}
		fmt.Fprintf(w, "- %s: CPU per activity %s ms with a process each, %s ms inline (target ≤ %s ms: %s); hop p50 %s ms and %s ms (target ≤ %s ms: %s); throughput %.1f and %.1f activities per second (×%.2f",
			kind, ms(pcpu), ms(icpu), ms(targetCPU), verdict(icpu <= targetCPU), ms(phop), ms(ihop), ms(hopTarget), verdict(ihop <= hopTarget), ptp, itp, itp/ptp)
		if kind == "sqlite" {
			fmt.Fprintf(w, "; target ×2: %s", verdict(itp >= 2*ptp))
		}
		fmt.Fprintf(w, ")\n")
	}
	fmt.Fprintln(w)
}

// verdict says whether a target was reached, in the report's words.
func verdict(ok bool) string {
	if ok {
		return "reached"
	}
	return "**not reached**"
}

// inlineFan is one fan-out run of the section.
type inlineFan struct {
	kind, mode string
	n          int
	t          fanTiming
	err        error // a run that failed is reported, not the end of the section
}

// printInlineFans prints the fan-outs' part of the section.
func printInlineFans(w io.Writer, fans []inlineFan) {
	if len(fans) > 0 {
		fmt.Fprintf(w, "`whimbrel run --supervise MODE` on the embedded store, in a fresh folder each, the two modes one after the other at each size: a for_each map of n `true` elements, and a static fan-out of one root and n dependent `true` activities. CPU is user + system of `whimbrel run` and of every process it reaped.\n\n")
		fmt.Fprintf(w, "| workflow | supervise | activities | took | CPU | CPU per activity | activities per second |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
		for _, f := range fans {
			if f.err != nil {
				fmt.Fprintf(w, "| %s | %s | %d | failed: %s | | | |\n", f.kind, f.mode, f.n, strings.ReplaceAll(strings.ReplaceAll(f.err.Error(), "|", "/"), "\n", " "))
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %.1fms | %.1f |\n", f.kind, f.mode, f.n, f.t.took.Round(100*time.Millisecond), f.t.cpu.Round(100*time.Millisecond),
				float64(f.t.cpu.Microseconds())/1000/float64(f.n), float64(f.n)/f.t.took.Seconds())
		}
		fmt.Fprintln(w)
		for _, mode := range superviseModes {
			for _, kind := range []string{"for_each map", "static fan-out"} {
				var mine []inlineFan
				for _, f := range fans {
					if f.kind == kind && f.mode == mode && f.err == nil {
						mine = append(mine, f)
					}
				}
				if len(mine) == 0 {
					continue
				}
				small, big := mine[0], mine[len(mine)-1]
				fmt.Fprintf(w, "- %s, %s: %d in %s (goal ≤ %.0f s: %s)", kind, mode, big.n, big.t.took.Round(100*time.Millisecond), fanTargetTime.Seconds(), verdict(big.t.took <= fanTargetTime))
				if big.n != small.n {
					tr := big.t.took.Seconds() / small.t.took.Seconds()
					fmt.Fprintf(w, "; time(%d) ÷ time(%d) = %.2f (goal ≤ %.1f: %s)", big.n, small.n, tr, fanTargetRatio, verdict(tr <= fanTargetRatio))
				}
				fmt.Fprintln(w)
			}
		}
		fmt.Fprintln(w)
	}
}
