package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The kinds of work measured on each side.
const (
	kindFan    = "fan-out" // a root activity, then n at once, each running `true`
	kindChain  = "chain"   // n activities one after another, each writing its start and end times
	kindMemory = "memory"  // n activities at once, each sleeping, to read the system's memory
)

// sleepCommand is what each activity of the memory measurement runs: long
// enough for the slowest side to have every activity running at once on a
// loaded machine.
var sleepCommand = []string{"sleep", "30"}

// work is one measurement's workload; dir is a fresh folder of its own.
type work struct {
	kind string
	n    int
	dir  string
}

func (w work) label() string {
	switch w.kind {
	case kindChain:
		return fmt.Sprintf("chain of %d", w.n)
	case kindMemory:
		return fmt.Sprintf("%d running", w.n)
	default:
		return fmt.Sprintf("fan-out of %d", w.n)
	}
}

// chainSteps are the commands of a chain's activities: each writes the
// time it started and the time it ended (Unix nanoseconds) to files in
// dir, as the DAG hop benchmark of the launcher does, so that a hop is the
// next activity's start less this one's end, on both sides alike.
func chainSteps(dir string, n int) [][]string {
	steps := make([][]string, n)
	for j := range steps {
		steps[j] = []string{"sh", "-c", fmt.Sprintf("date +%%s%%N > %s/s%02d.start; date +%%s%%N > %s/s%02d.end", dir, j, dir, j)}
	}
	return steps
}

// readHops reads the chain's times back and returns its n-1 hops: from an
// activity's end to the next one's start.
func readHops(dir string, n int) ([]time.Duration, error) {
	at := func(j int, what string) (time.Time, error) {
		name := filepath.Join(dir, fmt.Sprintf("s%02d.%s", j, what))
		raw, err := os.ReadFile(name)
		if err != nil {
			return time.Time{}, fmt.Errorf("read the chain's time: %w", err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("read the chain's time in %s: %w", name, err)
		}
		return time.Unix(0, ns), nil
	}
	hops := make([]time.Duration, 0, n)
	for j := 1; j < n; j++ {
		end, err := at(j-1, "end")
		if err != nil {
			return nil, err
		}
		start, err := at(j, "start")
		if err != nil {
			return nil, err
		}
		hops = append(hops, start.Sub(end))
	}
	return hops, nil
}

// percentile is the nearest-rank p-th percentile of ds (as the other
// benchmarks of the project take it), 0 for none.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

// definition is the Whimbrel workflow definition of the same workload.
func definition(w work) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: peers-%s\nactivities:\n", strings.ReplaceAll(w.kind, "-", ""))
	switch w.kind {
	case kindFan:
		b.WriteString("  root: {command: [\"true\"]}\n")
		for i := 0; i < w.n; i++ {
			fmt.Fprintf(&b, "  d%04d: {command: [\"true\"], depends_on: [root]}\n", i)
		}
	case kindChain:
		for j, argv := range chainSteps(w.dir, w.n) {
			fmt.Fprintf(&b, "  s%02d:\n    command: [%s, %s, %s]\n", j, argv[0], argv[1], strconv.Quote(argv[2]))
			if j > 0 {
				fmt.Fprintf(&b, "    depends_on: [s%02d]\n", j-1)
			}
		}
	case kindMemory:
		for i := 0; i < w.n; i++ {
			fmt.Fprintf(&b, "  m%03d: {command: [%s, %s]}\n", i, sleepCommand[0], strconv.Quote(sleepCommand[1]))
		}
	}
	return b.String()
}
