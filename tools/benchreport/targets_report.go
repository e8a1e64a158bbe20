package main

// The targets' section: one table of every target with the earlier
// build's figure, the current build's, the goal and whether it is reached,
// then the runs behind it.

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// targetsHeading heads the section -targets writes.
const targetsHeading = "## Issue 36's targets, build beside build"

// costBefore is the cost table's figure for the earlier build, in USD per
// million activities: the table is measured with this tree's store code,
// which no earlier build's binaries can run, so the earlier figure is the
// one its own report printed, and the goal is not to exceed it.
const costBefore = 26.75

// targetResults is everything a -targets run measured.
type targetResults struct {
	sizes              targetSizes
	before, after, rev string
	load0, load1       string
	began              time.Time
	took               time.Duration
	builds, fanBuilds  []tbuild
	engine             map[string]map[string][]targetEngine // by store, by build label
	units              unitsReport                          // the cost table's walk (this tree's code)
	rawWrites          float64                              // conditional writes per second DynamoDB Local sustained, the highest of rawEach
	rawEach            []float64                            // each time it was measured
	rss                []*targetRSS
	fans               []targetFan
	notes              map[string]string // measurements that failed, by what
}

// targetRow is one line of the targets' table.
type targetRow struct {
	name, goal, before, after, verdict string
}

// targetRowNames are the rows the table always has, in its order, even
// when a measurement failed (the row then says so).
var targetRowNames = []string{
	"CPU per activity, embedded store",
	"CPU per activity, DynamoDB Local",
	"Throughput, one launcher, embedded store",
	"Throughput, one launcher, DynamoDB Local",
	"DAG hop p50, embedded store",
	"DAG hop p95, embedded store",
	"DAG hop p50, DynamoDB Local",
	"DAG hop p95, DynamoDB Local",
	"Wrapper resident memory heartbeating, DynamoDB Local",
	"Wrapper resident memory heartbeating, embedded store",
	"for_each map, largest: time",
	"for_each map: time(big) ÷ time(small)",
	"for_each map: CPU per activity",
	"static fan-out, largest: time",
	"static fan-out: time(big) ÷ time(small)",
	"static fan-out: CPU per activity",
	"Write units per activity (cost table)",
	"Write units per activity, measured",
}

// notMeasured is a cell of a figure the run could not take.
const notMeasured = "not measured"

func msf(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// bestEngine is the best of a build's engine runs on a store: the least
// CPU, the most activities per second, every hop of every run, and the
// units per activity of the run that counted them (-1: none did). ok is
// false without a run.
func (r targetResults) bestEngine(kind, label string) (cpu time.Duration, perSecond float64, hops []time.Duration, wu float64, ok bool) {
	runs := r.engine[kind][label]
	wu = -1 // none counted
	for i, e := range runs {
		if i == 0 || e.cpu < cpu {
			cpu = e.cpu
		}
		perSecond = max(perSecond, e.perSecond)
		hops = append(hops, e.hops...)
		if e.counted {
			wu = e.writeUnits
		}
	}
	sort.Slice(hops, func(i, j int) bool { return hops[i] < hops[j] })
	return cpu, perSecond, hops, wu, len(runs) > 0 && len(hops) > 0
}

// targetRows computes the table's rows from what the run measured.
func targetRows(r targetResults) []targetRow {
	rows := map[string]targetRow{}
	set := func(name, goal, before, after, verdictText string) {
		rows[name] = targetRow{name, goal, before, after, verdictText}
	}
	const old, cur = "before", "after, --supervise inline"
	stores := [][2]string{{"sqlite", "embedded store"}, {"dynamodb", "DynamoDB Local"}}
	for _, s := range stores {
		bc, bt, bh, bw, bok := r.bestEngine(s[0], old)
		ac, at, ah, aw, aok := r.bestEngine(s[0], cur)
		cell := func(ok bool, f func() string) string {
			if !ok {
				return notMeasured
			}
			return f()
		}
		v := func(ok bool, reached bool) string {
			if !ok {
				return notMeasured
			}
			return verdict(reached)
		}
		pcpu, _, _, _, pok := r.bestEngine(s[0], "after, --supervise process")
		set("CPU per activity, "+s[1], "≤ "+msf(targetCPU), cell(bok, func() string { return msf(bc) }),
			cell(aok, func() string {
				t := fmt.Sprintf("%s (%.2f× before)", msf(ac), float64(ac)/float64(max(bc, 1)))
				if pok {
					t += fmt.Sprintf("; with --supervise process %s", msf(pcpu))
				}
				return t
			}), v(aok, ac <= targetCPU))
		hopGoal := targetHopSQLite
		if s[0] == "dynamodb" {
			hopGoal = targetHopDynamo
		}
		pc := func(h []time.Duration, p int) time.Duration { return h[(len(h)-1)*p/100] }
		set("DAG hop p50, "+s[1], "≤ "+msf(hopGoal), cell(bok, func() string { return msf(pc(bh, 50)) }), cell(aok, func() string { return msf(pc(ah, 50)) }),
			v(aok, aok && pc(ah, 50) <= hopGoal))
		set("DAG hop p95, "+s[1], "reported", cell(bok, func() string { return msf(pc(bh, 95)) }), cell(aok, func() string { return msf(pc(ah, 95)) }), "–")
		if s[0] == "sqlite" {
			set("Throughput, one launcher, "+s[1], "≥ 2× before", cell(bok, func() string { return fmt.Sprintf("%.1f per s", bt) }),
				cell(aok, func() string { return fmt.Sprintf("%.1f per s (×%.2f)", at, at/max(bt, 1e-9)) }), v(aok && bok, at >= 2*bt))
			continue
		}
		bound := 0.0
		if lw := safeLifeWrites(r.units); lw > 0 {
			bound = r.rawWrites / lw
		}
		share := func(tp float64) string {
			if bound == 0 {
				return fmt.Sprintf("%.1f per s (store's bound not measured)", tp)
			}
			return fmt.Sprintf("%.1f per s, %.2f of the store's bound (%.1f per s)", tp, tp/bound, bound)
		}
		set("Throughput, one launcher, DynamoDB Local", "the share of the store's bound, reported", cell(bok, func() string { return share(bt) }), cell(aok, func() string { return share(at) }), "–")
		set("Write units per activity, measured", "no more than before", cell(bw >= 0, func() string { return fmt.Sprintf("%.1f", bw) }), cell(aw >= 0, func() string { return fmt.Sprintf("%.1f", aw) }),
			v(aw >= 0 && bw >= 0, aw <= bw*1.001))
	}
	if len(r.units.phases) > 0 {
		_, _, cw, cr := activityCost(r.units)
		set("Write units per activity (cost table)", fmt.Sprintf("≤ $%.2f per million", costBefore), fmt.Sprintf("$%.2f per million (%s's report)", costBefore, r.rev),
			fmt.Sprintf("$%.2f per million", cw+cr), verdict(cw+cr <= costBefore+0.005))
	}
	rssRow := func(name, store string, match func(*targetRSS) bool, goal string, judge bool) {
		var b, a []string
		reached, failed, judged := true, false, 0
		for _, x := range r.rss {
			if x.store != store {
				continue
			}
			var peak rss
			for _, v := range x.rss {
				if v.all > peak.all {
					peak = v
				}
			}
			cellText := notMeasured
			if x.err == nil && peak.all > 0 {
				cellText = fmt.Sprintf("%s MB at most (%s)", peak, x.build)
			}
			if strings.HasPrefix(x.build, "before") {
				b = append(b, cellText)
				continue
			}
			a = append(a, cellText)
			if match(x) {
				judged++
				if x.err != nil || peak.all == 0 {
					failed = true
				}
				reached = reached && peak.all <= rssTarget
			}
		}
		vt := "–"
		switch {
		case judge && (judged == 0 || failed):
			vt = notMeasured
		case judge:
			vt = verdict(reached)
		}
		set(name, goal, orNot(strings.Join(b, "; ")), orNot(strings.Join(a, "; ")), vt)
	}
	rssRow("Wrapper resident memory heartbeating, DynamoDB Local", "DynamoDB Local", func(x *targetRSS) bool { return strings.Contains(x.build, "container") },
		fmt.Sprintf("≤ %.0f MB (container build)", float64(rssTarget)/1024), true)
	rssRow("Wrapper resident memory heartbeating, embedded store", "sqlite", func(*targetRSS) bool { return false }, "reported", false)
	for _, kind := range []string{"for_each map", "static fan-out"} {
		fanRows(r, kind, set)
	}
	var out []targetRow
	for _, name := range targetRowNames {
		row, ok := rows[name]
		if !ok {
			row = targetRow{name, "", notMeasured, notMeasured, notMeasured}
		}
		out = append(out, row)
	}
	return out
}

func orNot(s string) string {
	if s == "" {
		return notMeasured
	}
	return s
}

// fanRows sets the rows of one kind of fan-out: its largest size's time,
// the ratio of the largest to the smallest, and the CPU per activity of
// the largest, with each build's default flags. Sizes run in rounds are
// judged on the rounds' medians: the largest's time and CPU are those of
// its median run, and the ratio is the median of each round's own ratio
// (a round's runs are close in time, so the machine's speed of the moment
// weighs on both).
func fanRows(r targetResults, kind string, set func(name, goal, before, after, verdict string)) {
	runs := func(label string) (small, big *targetFan) {
		byRound := map[int]map[int]*targetFan{} // round → size → run
		sizes := map[int][]*targetFan{}
		for i := range r.fans {
			f := &r.fans[i]
			if f.kind != kind || f.build != label {
				continue
			}
			if byRound[f.round] == nil {
				byRound[f.round] = map[int]*targetFan{}
			}
			byRound[f.round][f.n] = f
			sizes[f.n] = append(sizes[f.n], f)
		}
		lo, hi := -1, -1
		for n := range sizes {
			if lo < 0 || n < lo {
				lo = n
			}
			if hi < 0 || n > hi {
				hi = n
			}
		}
		if lo < 0 {
			return nil, nil
		}
		small, big = medianRun(sizes[lo]), medianRun(sizes[hi])
		if small == nil || big == nil || small.err != nil || big.err != nil || len(byRound) < 2 {
			return small, big
		}
		// The ratio of the rounds: big's took stands for the median of
		// each round's big ÷ small, scaled onto small's took.
		var ratios []float64
		for _, runs := range byRound {
			s, b := runs[lo], runs[hi]
			if s != nil && b != nil && s.err == nil && b.err == nil && s.t.took > 0 {
				ratios = append(ratios, b.t.took.Seconds()/s.t.took.Seconds())
			}
		}
		if len(ratios) > 0 {
			sort.Float64s(ratios)
			rb := *big
			rb.ratio = ratios[len(ratios)/2]
			rb.ratios = ratios
			for _, f := range append(sizes[lo], sizes[hi]...) {
				if f.err != nil {
					rb.failedRuns++
				}
			}
			big = &rb
		}
		return small, big
	}
	bs, bb := runs("before")
	as, ab := runs("after, default flags")
	failed := func(f *targetFan) (string, bool) {
		switch {
		case f == nil:
			return notMeasured, true
		case f.absent:
			return "no for_each in this build", true
		case f.err != nil:
			return "failed (see below)", true
		}
		return "", false
	}
	timeCell := func(f *targetFan) string {
		if s, bad := failed(f); bad {
			return s
		}
		return fmt.Sprintf("%d in %s", f.n, f.t.took.Round(100*time.Millisecond))
	}
	ratio := func(s, b *targetFan) (float64, string) {
		if m, bad := failed(s); bad {
			return 0, m
		}
		if m, bad := failed(b); bad {
			return 0, m
		}
		if b.ratio > 0 {
			var each []string
			for _, x := range b.ratios {
				each = append(each, fmt.Sprintf("%.2f", x))
			}
			failed := ""
			if b.failedRuns > 0 {
				failed = fmt.Sprintf("; %d run(s) failed, left out", b.failedRuns)
			}
			return b.ratio, fmt.Sprintf("%.2f (%d ÷ %d, the median of %d rounds: %s%s)", b.ratio, b.n, s.n, len(b.ratios), strings.Join(each, ", "), failed)
		}
		x := b.t.took.Seconds() / s.t.took.Seconds()
		return x, fmt.Sprintf("%.2f (%d ÷ %d)", x, b.n, s.n)
	}
	cpuCell := func(f *targetFan) string {
		if s, bad := failed(f); bad {
			return s
		}
		return fmt.Sprintf("%.1f ms", float64(f.t.cpu.Microseconds())/1000/float64(f.n))
	}
	_, abad := failed(ab)
	goalTime := fmt.Sprintf("≤ %.0f s", fanTargetTime.Seconds())
	timeVerdict := notMeasured
	if !abad {
		timeVerdict = verdict(ab.t.took <= fanTargetTime)
		if r.sizes.quick {
			timeVerdict += " (quick sizes)"
		}
	}
	set(kind+", largest: time", goalTime, timeCell(bb), timeCell(ab), timeVerdict)
	_, bt := ratio(bs, bb)
	ax, at := ratio(as, ab)
	rv := notMeasured
	if ax > 0 {
		rv = verdict(ax <= fanTargetRatio)
	}
	set(kind+": time(big) ÷ time(small)", fmt.Sprintf("≤ %.1f", fanTargetRatio), bt, at, rv)
	set(kind+": CPU per activity", "reported", cpuCell(bb), cpuCell(ab), "–")
}

// writeTargets writes the section: the table of targets, then the runs.
func writeTargets(w io.Writer, r targetResults) {
	mode := "full sizes"
	cmd := "make bench"
	if r.sizes.quick {
		mode, cmd = "quick sizes (-targets-quick): a trial, not the figures", "scripts/dynamodb-local run -- go run ./tools/benchreport -targets -targets-quick -bin DIR -before DIR0"
	}
	fmt.Fprintf(w, "%s\n\n", targetsHeading)
	fmt.Fprintf(w, "Measured on %s by `%s` (%s; %s in all; load average %s at the start, %s at the end: the machine is shared). Before: the binaries of %s (`%s`), each with its default flags; after: this build (`%s`). Each build installs its own tables (its own `whimbrel install`) fresh for each measurement and starts its own workflows (its own `whimbrel start`, or `whimbrel run` in a fresh folder).\n\n",
		r.began.UTC().Format("2006-01-02"), cmd, mode, r.took.Round(time.Second), r.load0, r.load1, r.rev, r.before, r.after)
	fmt.Fprintf(w, "| target | goal | before (%s) | after | reached |\n| --- | --- | --- | --- | --- |\n", r.rev)
	for _, row := range targetRows(r) {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.name, cell(row.goal), cell(row.before), cell(row.after), row.verdict)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "The engine rows: %d ready `true` activities through one `whimbrel-launcher` (`--log-dir`) with one `whimbrel-monitor`, each build %d time(s) on each store, alternating; CPU is user + system of the launcher, every process it reaped and the monitor, per activity; throughput is from `whimbrel start` to the workflow's end. After is the current build with `--supervise inline`. The hop is a command's start after its upstream's end in a chain of %d through a fresh launcher (percentiles of every hop of the build's runs). CPU and throughput: the best of the build's runs. On DynamoDB Local, in each build's first round, a workflow of %d ready `true` activities then runs through a fresh launcher and monitor that reach the store through a proxy asking each call for its consumed capacity: the measured units are per activity of that workflow, its start included, successful calls only (the timed runs go to the store directly). The store's bound is the conditional writes per second DynamoDB Local sustained in this run (%.0f: the higher of %s, with 4 writers for 3 s before and after the engine's runs) ÷ the cost table's write units of an activity's life (%.1f).\n\n",
		r.sizes.n, r.sizes.rounds, engineChain, unitsActivities, r.rawWrites, rates(r.rawEach), safeLifeWrites(r.units))
	fmt.Fprintf(w, "| store | binaries | activities per second | CPU per activity | of it the launcher's own | the monitor's | the wrappers and commands | hop p50 | hop p95 | write units per activity | read units per activity |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, kind := range []string{"sqlite", "dynamodb"} {
		for _, b := range r.builds {
			for _, e := range r.engine[kind][b.label] {
				h := append([]time.Duration(nil), e.hops...)
				sort.Slice(h, func(i, j int) bool { return h[i] < h[j] })
				p50, p95 := "–", "–"
				if len(h) > 0 {
					p50, p95 = msf(h[len(h)/2]), msf(h[(len(h)-1)*95/100])
				}
				units := "| – | –"
				if e.counted {
					units = fmt.Sprintf("| %.1f | %.1f", e.writeUnits, e.readUnits)
				}
				fmt.Fprintf(w, "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s %s |\n", kind, b.label, e.perSecond, msf(e.cpu), msf(e.launcher), msf(e.monitor),
					msf(e.cpu-e.launcher-e.monitor), p50, p95, units)
			}
		}
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "Wrapper resident memory: VmRSS in MB (in brackets its anonymous part) of `whimbrel-run --heartbeat-interval 200ms -- sleep` on an activity its own build started, read %s in, the runs side by side. Before's container image ran the same whimbrel-run as its native build.\n\n", durList(r.sizes.rssAt))
	fmt.Fprintf(w, "| whimbrel-run | store |")
	for _, at := range r.sizes.rssAt {
		fmt.Fprintf(w, " at %s |", at)
	}
	fmt.Fprintf(w, "\n| --- | --- |%s\n", strings.Repeat(" ---: |", len(r.sizes.rssAt)))
	for _, x := range r.rss {
		fmt.Fprintf(w, "| %s | %s |", x.build, x.store)
		if x.err != nil {
			fmt.Fprintf(w, " failed: %s |%s\n", cell(x.err.Error()), strings.Repeat(" |", len(r.sizes.rssAt)-1))
			continue
		}
		for _, v := range x.rss {
			fmt.Fprintf(w, " %s |", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "Fan-outs: `whimbrel run` on the embedded store in a fresh folder each, the builds one after the other at each size: a for_each map of n `true` elements (`for_each: {count: n}`, once), and a static fan-out of one root and n dependent `true` activities (%d round(s) of every size and build, one after the other; the rows above take each size's median run, and the median of the rounds' own ratios). \"default flags\" passes no `--supervise`: whatever the build does by default (the rows above are judged on it). CPU is user + system of `whimbrel run` and every process it reaped.\n\n", r.sizes.fanRounds)
	fmt.Fprintf(w, "| workflow | binaries | activities | took | CPU | CPU per activity | activities per second |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, f := range r.fans {
		if f.err != nil {
			fmt.Fprintf(w, "| %s | %s | %d | %s | | | |\n", f.kind, f.build, f.n, cell(f.err.Error()))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %.1f ms | %.1f |\n", f.kind, f.build, f.n, f.t.took.Round(100*time.Millisecond), f.t.cpu.Round(100*time.Millisecond),
			float64(f.t.cpu.Microseconds())/1000/float64(f.n), float64(f.n)/f.t.took.Seconds())
	}
	fmt.Fprintln(w)
	if len(r.units.phases) > 0 {
		perW, perR, cw, cr := activityCost(r.units)
		fmt.Fprintf(w, "Cost table (this tree's store code, as \"Capacity units per activity and per heartbeat\" measures it): %.1f write units and %.1f read units per activity = $%.2f per million activities.\n\n", perW, perR, cw+cr)
	}
	if len(r.notes) > 0 {
		var keys []string
		for k := range r.notes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "Measurements that failed:\n\n")
		for _, k := range keys {
			fmt.Fprintf(w, "- %s: %s\n", k, cell(r.notes[k]))
		}
		fmt.Fprintln(w)
	}
}

// rates is "812 and 259": each measurement of the store's rate.
func rates(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.0f", r)
	}
	if len(s) == 0 {
		return "none measured"
	}
	return strings.Join(s, " and ")
}

func safeLifeWrites(u unitsReport) float64 {
	if len(u.phases) == 0 {
		return 0
	}
	return lifeWrites(u)
}

// cell makes text safe in a table cell: one line, no column breaks.
func cell(s string) string {
	return strings.NewReplacer("|", "/", "\n", " ", "\r", " ").Replace(s)
}

// medianRun is the run of runs (of one size) whose time is the median of
// those that did not fail; a failed run when all failed.
func medianRun(runs []*targetFan) *targetFan {
	var ok []*targetFan
	for _, f := range runs {
		if f.err == nil {
			ok = append(ok, f)
		}
	}
	if len(ok) == 0 {
		if len(runs) == 0 {
			return nil
		}
		return runs[0]
	}
	sort.Slice(ok, func(i, j int) bool { return ok[i].t.took < ok[j].t.took })
	return ok[len(ok)/2]
}
