package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// report holds every run's measure, by workload and by side, in the order
// they ran.
type report struct {
	sides    []side
	works    []work
	results  map[string]map[string][]measure
	began    time.Time
	ended    time.Time
	versions []string
	command  string
	rounds   int
}

func (r *report) add(w work, s side, m measure) {
	if r.results[w.label()] == nil {
		r.results[w.label()] = map[string][]measure{}
	}
	r.results[w.label()][s.name()] = append(r.results[w.label()][s.name()], m)
}

// cells formats each run of one workload on one side, joined with " · ".
func (r *report) cells(w work, s side, f func(measure) string) string {
	ms := r.results[w.label()][s.name()]
	if len(ms) == 0 {
		return "–"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = f(m)
	}
	return strings.Join(parts, " · ")
}

func (r *report) row(b *strings.Builder, title string, w work, f func(measure) string) {
	fmt.Fprintf(b, "| %s |", title)
	for _, s := range r.sides {
		fmt.Fprintf(b, " %s |", r.cells(w, s, f))
	}
	b.WriteString("\n")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}

func megabytes(kB int) string {
	return fmt.Sprintf("%.0f MB", float64(kB)/1024)
}

func (r *report) markdown() string {
	var b strings.Builder
	lo, hi := r.loadRange()
	fmt.Fprintf(&b, "Measured on %s from %s to %s UTC by `%s`: %s/%s, %d cores, %s. ", r.began.Format("2006-01-02"),
		r.began.Format("15:04"), r.ended.Format("15:04"), r.command, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel())
	fmt.Fprintf(&b, "The machine's one-minute load average was %.1f to %.1f over the run; every workload ran on each side in turn (%d round%s, who goes first moving each round), so all sides saw the same load. ",
		lo, hi, r.rounds, plural(r.rounds))
	if len(r.versions) > 0 {
		fmt.Fprintf(&b, "Versions: %s.", strings.Join(r.versions, "; "))
	}
	b.WriteString("\n\n")
	fmt.Fprintf(&b, "| measure |")
	for _, s := range r.sides {
		name := s.name()
		if _, ok := s.(*temporalSide); ok {
			name += " (dev server + worker)"
		}
		fmt.Fprintf(&b, " %s |", name)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(r.sides)) + "\n")
	for _, w := range r.works {
		switch w.kind {
		case kindFan:
			r.row(&b, w.label()+": wall time", w, func(m measure) string { return seconds(m.wall) })
			r.row(&b, w.label()+": CPU per activity", w, func(m measure) string {
				s := ms(m.cpu / time.Duration(w.n+1))
				if m.storeCPU > 0 {
					s += " (+ " + ms(m.storeCPU/time.Duration(w.n+1)) + " DynamoDB Local)"
				}
				return s
			})
		case kindChain:
			r.row(&b, w.label()+": hop p50 / p95", w, func(m measure) string {
				return ms(percentile(m.hops, 50)) + " / " + ms(percentile(m.hops, 95))
			})
		case kindMemory:
			r.row(&b, w.label()+": resident memory, VmRSS (PSS)", w, func(m measure) string {
				s := megabytes(m.mem.kB) + " (PSS " + megabytes(m.mem.pssKB) + fmt.Sprintf(") in %d processes", m.mem.procs)
				if m.storeKB > 0 {
					s += " (+ " + megabytes(m.storeKB) + " DynamoDB Local)"
				}
				if m.mem.leaves < w.n {
					s += fmt.Sprintf(" (only %d of %d running at once)", m.mem.leaves, w.n)
				}
				return s
			})
		}
	}
	b.WriteString("| load average during its runs |")
	for _, s := range r.sides {
		lo, hi := r.loadRangeOf(s)
		fmt.Fprintf(&b, " %.1f–%.1f |", lo, hi)
	}
	b.WriteString("\n\n")
	r.ratios(&b)
	return b.String()
}

// ratios says, for each Whimbrel side, its wall time and CPU per activity
// as multiples of Temporal's, averaged over the rounds.
func (r *report) ratios(b *strings.Builder) {
	var peer side
	for _, s := range r.sides {
		if _, ok := s.(*temporalSide); ok {
			peer = s
		}
	}
	if peer == nil {
		return
	}
	for _, s := range r.sides {
		if s == peer {
			continue
		}
		var parts []string
		for _, w := range r.works {
			if w.kind != kindFan {
				continue
			}
			ours, theirs := r.results[w.label()][s.name()], r.results[w.label()][peer.name()]
			if len(ours) == 0 || len(theirs) == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d: wall %.2f×, CPU %.2f×", w.n,
				mean(ours, wallOf)/mean(theirs, wallOf), mean(ours, cpuOfMeasure)/mean(theirs, cpuOfMeasure)))
		}
		if len(parts) == 0 {
			continue
		}
		note := ""
		if ws, ok := s.(*whimbrelSide); ok && ws.store == "dynamodb" {
			note = " (DynamoDB Local's CPU not counted)"
		}
		fmt.Fprintf(b, "- %s ÷ Temporal, fan-out of %s%s\n", s.name(), strings.Join(parts, "; "), note)
	}
	b.WriteString("\n")
}

func wallOf(m measure) float64       { return m.wall.Seconds() }
func cpuOfMeasure(m measure) float64 { return m.cpu.Seconds() }

func mean(ms []measure, f func(measure) float64) float64 {
	var t float64
	for _, m := range ms {
		t += f(m)
	}
	return t / float64(len(ms))
}

func (r *report) loadRange() (float64, float64) {
	lo, hi := -1.0, 0.0
	for _, s := range r.sides {
		l, h := r.loadRangeOf(s)
		if lo < 0 || l < lo {
			lo = l
		}
		hi = max(hi, h)
	}
	return max(lo, 0), hi
}

func (r *report) loadRangeOf(s side) (float64, float64) {
	lo, hi := -1.0, 0.0
	for _, bySide := range r.results {
		for _, m := range bySide[s.name()] {
			for _, l := range m.load {
				if lo < 0 || l < lo {
					lo = l
				}
				hi = max(hi, l)
			}
		}
	}
	return max(lo, 0), hi
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
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
