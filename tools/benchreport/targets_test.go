package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// wantTargetRows are the targets the section must show, written out here
// rather than taken from targetRowNames, so that a row dropped from the
// report fails the test.
var wantTargetRows = []string{
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

// tableRow finds the targets table's row named name in md and returns its
// cells after the name.
func tableRow(t *testing.T, md, name string) []string {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if rest, ok := strings.CutPrefix(l, "| "+name+" |"); ok {
			cells := strings.Split(strings.TrimSuffix(rest, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			return cells
		}
	}
	t.Fatalf("the targets' table has no row %q:\n%s", name, md)
	return nil
}

func hopsOf(ms ...int) []time.Duration {
	var h []time.Duration
	for _, m := range ms {
		h = append(h, time.Duration(m)*time.Millisecond)
	}
	return h
}

// fullResults is a run where everything was measured: the earlier build
// has no for_each, the current one reaches some targets and not others.
func fullResults() targetResults {
	eng := func(cpuMS, perSecond, wu float64, hops []time.Duration) targetEngine {
		return targetEngine{engineRun: engineRun{perSecond: perSecond, cpu: time.Duration(cpuMS * float64(time.Millisecond)), hops: hops}, writeUnits: wu, counted: wu > 0}
	}
	r := targetResults{
		sizes:  targetSizes{n: 150, rounds: 1, rssAt: []time.Duration{3 * time.Second, 60 * time.Second}},
		before: "/b0", after: "/b1", rev: "7eecfea", load0: "1", load1: "2", began: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC),
		builds: []tbuild{{"before", "/b0", ""}, {"after, --supervise inline", "/b1", "inline"}, {"after, --supervise process", "/b1", "process"}},
		engine: map[string]map[string][]targetEngine{
			"sqlite": {"before": {eng(21, 40, 0, hopsOf(19, 20, 21))}, "after, --supervise inline": {eng(6, 100, 0, hopsOf(8, 9, 30))},
				"after, --supervise process": {eng(15, 50, 0, hopsOf(15, 16, 17))}},
			"dynamodb": {"before": {eng(22, 30, 16, hopsOf(52, 53, 60))}, "after, --supervise inline": {eng(9, 60, 15, hopsOf(31, 32, 40))}},
		},
		units: unitsReport{phases: []phase{{write: 20, read: 2}, {write: 5, read: 2}, {write: 4}, {write: 3}, {write: 2}}, heartbeat: phase{write: 1}},
		rss: []*targetRSS{
			{build: "before, whimbrel-run", store: "DynamoDB Local", rss: []rss{{18000, 4000}, {18500, 4000}}},
			{build: "after, container build (-tags x)", store: "DynamoDB Local", rss: []rss{{12000, 3000}, {12500, 3000}}},
			{build: "after, native build", store: "sqlite", rss: []rss{{15000, 3000}, {15500, 3000}}},
		},
		rawWrites: 800, rawEach: []float64{800, 650},
	}
	r.fans = []targetFan{
		{kind: "for_each map", build: "before", n: 2500, absent: true, err: errors.New("no for_each in this build")},
		{kind: "for_each map", build: "after, default flags", n: 2500, t: fanTiming{took: 10 * time.Second, cpu: 20 * time.Second}},
		{kind: "for_each map", build: "before", n: 10000, absent: true, err: errors.New("no for_each in this build")},
		{kind: "for_each map", build: "after, default flags", n: 10000, t: fanTiming{took: 50 * time.Second, cpu: 80 * time.Second}},
		{kind: "static fan-out", build: "before", n: 500, t: fanTiming{took: 10 * time.Second, cpu: 10 * time.Second}},
		{kind: "static fan-out", build: "after, default flags", n: 500, t: fanTiming{took: 5 * time.Second, cpu: 4 * time.Second}},
		{kind: "static fan-out", build: "before", n: 2000, t: fanTiming{took: 45 * time.Second, cpu: 40 * time.Second}},
		{kind: "static fan-out", build: "after, default flags", n: 2000, t: fanTiming{took: 19 * time.Second, cpu: 16 * time.Second}},
	}
	return r
}

// TestTargetsReportHasEveryTarget: the section has a row for every
// target, with the figures and verdicts of the run, and says which build
// had no for_each.
func TestTargetsReportHasEveryTarget(t *testing.T) {
	var b strings.Builder
	writeTargets(&b, fullResults())
	md := b.String()
	if !strings.HasPrefix(md, targetsHeading+"\n") {
		t.Fatalf("the section does not start with its heading:\n%s", md)
	}
	for _, name := range wantTargetRows {
		cells := tableRow(t, md, name)
		if len(cells) != 4 {
			t.Errorf("row %q has %d cells after its name, want 4 (goal, before, after, reached): %q", name, len(cells), cells)
		}
	}
	for name, want := range map[string][2]string{ // after, reached
		"CPU per activity, embedded store":                     {"6.0 ms (0.29× before); with --supervise process 15.0 ms", "reached"},
		"CPU per activity, DynamoDB Local":                     {"9.0 ms (0.41× before)", "**not reached**"},
		"Throughput, one launcher, embedded store":             {"100.0 per s (×2.50)", "reached"},
		"DAG hop p50, embedded store":                          {"9.0 ms", "reached"},
		"DAG hop p50, DynamoDB Local":                          {"32.0 ms", "**not reached**"},
		"Wrapper resident memory heartbeating, DynamoDB Local": {"12.2 (2.9) MB at most (after, container build (-tags x))", "reached"},
		"for_each map, largest: time":                          {"10000 in 50s", "reached"},
		"for_each map: time(big) ÷ time(small)":                {"5.00 (10000 ÷ 2500)", "**not reached**"},
		"static fan-out: time(big) ÷ time(small)":              {"3.80 (2000 ÷ 500)", "reached"},
		"Write units per activity, measured":                   {"15.0", "reached"},
	} {
		cells := tableRow(t, md, name)
		if cells[2] != want[0] || cells[3] != want[1] {
			t.Errorf("row %q: after %q, reached %q; want %q, %q", name, cells[2], cells[3], want[0], want[1])
		}
	}
	if !strings.Contains(md, "(800: the higher of 800 and 650,") {
		t.Errorf("the store's bound does not say the rates it was taken from:\n%s", md)
	}
	if c := tableRow(t, md, "for_each map, largest: time"); c[1] != "no for_each in this build" {
		t.Errorf("the earlier build's for_each cell is %q, want it to say it has none", c[1])
	}
	// The cost table of the units above: 14 life + 20 × 1 + 10 = 44 write
	// units, 2 + 1 read units: $27.50 + $0.375.
	if c := tableRow(t, md, "Write units per activity (cost table)"); c[2] != "$27.88 per million" || c[3] != "**not reached**" {
		t.Errorf("cost table row: %q", c)
	}
}

// TestTargetsReportKeepsRowsNotMeasured: a run that measured nothing still
// shows every target, each saying it was not measured, and lists what
// failed.
func TestTargetsReportKeepsRowsNotMeasured(t *testing.T) {
	var b strings.Builder
	writeTargets(&b, targetResults{sizes: targetSizes{rssAt: []time.Duration{3 * time.Second}}, notes: map[string]string{"engine sqlite before": "whimbrel install: exit status 1 | <script>"}})
	md := b.String()
	for _, name := range wantTargetRows {
		cells := tableRow(t, md, name)
		if cells[3] != notMeasured && cells[3] != "–" {
			t.Errorf("row %q says %q with nothing measured", name, cells[3])
		}
	}
	if !strings.Contains(md, "- engine sqlite before: whimbrel install: exit status 1 / <script>") {
		t.Errorf("the failure is not listed, with its column break made safe:\n%s", md)
	}
}

// TestTargetsFanOutJudgedOnTheRoundsMedian: a static fan-out run in
// rounds is judged on the median of each round's own ratio, and on its
// largest size's median time; a failed run counts in neither; every run
// is listed.
func TestTargetsFanOutJudgedOnTheRoundsMedian(t *testing.T) {
	r := fullResults() // round 0: 500 in 5 s, 2000 in 19 s: 3.80
	r.sizes.fanRounds = 4
	run := func(round, n int, took time.Duration, err error) targetFan {
		return targetFan{kind: "static fan-out", build: "after, default flags", n: n, round: round, t: fanTiming{took: took, cpu: 4 * time.Second}, err: err}
	}
	r.fans = append(r.fans,
		run(1, 500, 9*time.Second, nil), run(1, 2000, 30*time.Second, nil), // 3.33
		run(2, 500, 4*time.Second, nil), run(2, 2000, 22*time.Second, nil), // 5.50
		run(3, 500, time.Second, nil), run(3, 2000, time.Second, errors.New("exit status 1")),
	)
	var b strings.Builder
	writeTargets(&b, r)
	md := b.String()
	if c := tableRow(t, md, "static fan-out: time(big) ÷ time(small)"); c[2] != "3.80 (2000 ÷ 500, the median of 3 rounds: 3.33, 3.80, 5.50; 1 run(s) failed, left out)" || c[3] != "reached" {
		t.Errorf("ratio row: %q, want the median of the rounds' ratios, reached", c)
	}
	if c := tableRow(t, md, "static fan-out, largest: time"); c[2] != "2000 in 22s" {
		t.Errorf("largest time row: %q, want the median of the runs that did not fail", c)
	}
	if n := strings.Count(md, "| static fan-out | after, default flags | 2000 |"); n != 4 {
		t.Errorf("%d runs of the static fan-out of 2000 listed, want 4:\n%s", n, md)
	}
}
