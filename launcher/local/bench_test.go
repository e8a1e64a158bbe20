package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// BenchmarkDAGHop measures the hop BENCHMARKS.md budgets: from an upstream
// command's exit to its downstream command's start, through the wrapper
// (record, advance, nudge) and a local launcher (claim, launch) to the next
// wrapper (claim, start). Each iteration runs a chain of activities whose
// commands write their start and end times; it reports the hops' p50 and
// p95 in milliseconds.
func BenchmarkDAGHop(b *testing.B) {
	b.Run("dynamodb", func(b *testing.B) {
		st := dynamotest.NewStore(b, dynamodb.Options{})
		benchmarkHop(b, st, dynamotest.Env(b, st.Prefix()))
	})
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "state.db")
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		if _, err := st.Install(context.Background(), false); err != nil {
			b.Fatal(err)
		}
		benchmarkHop(b, st, []string{"WHIMBREL_STORE=sqlite:" + path})
	})
}

func benchmarkHop(b *testing.B, st state.Store, storeEnv []string) {
	const chain = 21 // 20 hops
	var hops []time.Duration
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		var def strings.Builder
		def.WriteString("name: hop\nactivities:\n")
		for j := 0; j < chain; j++ {
			fmt.Fprintf(&def, "  s%02d:\n    command: [sh, -c, 'date +%%s%%N > %s/s%02d.start; date +%%s%%N > %s/s%02d.end']\n", j, dir, j, dir, j)
			if j > 0 {
				fmt.Fprintf(&def, "    depends_on: [s%02d]\n", j-1)
			}
		}
		d, err := definition.Parse("hop.yaml", []byte(def.String()))
		if err != nil {
			b.Fatal(err)
		}
		nl, err := nudge.Listen()
		if err != nil {
			b.Fatal(err)
		}
		lb := &local.Backend{Wrapper: wrapper, LogDir: dir,
			Env: append(append([]string{}, storeEnv...), "PATH="+os.Getenv("PATH"), nudge.Env+"="+nl.Addr())}
		l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: lb},
			Interval: time.Second, Nudge: nl.C()})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if wf := launchtest.WaitSettled(b, st, id, 5*time.Minute); wf.State != state.WorkflowCompleted {
			b.Fatalf("workflow %s: %s", wf.State, wf.Reason)
		}
		cancel()
		<-done
		lb.Wait()
		nl.Close()
		for j := 1; j < chain; j++ {
			hops = append(hops, readNanos(b, dir, j, "start").Sub(readNanos(b, dir, j-1, "end")))
		}
	}
	sort.Slice(hops, func(i, j int) bool { return hops[i] < hops[j] })
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(hops[len(hops)/2]), "hop-p50-ms")
	b.ReportMetric(ms(hops[len(hops)*95/100]), "hop-p95-ms")
	b.ReportMetric(0, "ns/op")
}

func readNanos(b *testing.B, dir string, j int, what string) time.Time {
	raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s%02d.%s", j, what)))
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, n)
}
