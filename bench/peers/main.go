// Command peers measures Whimbrel beside Temporal on the same machine and
// the same work, in alternating runs, and prints a Markdown table: fan-outs
// of `true` activities (wall time, CPU per activity of every process of
// each system), a chain's hop latency, and the resident memory of the
// whole system while activities run. Temporal is its dev server
// (`temporal server start-dev`, on SQLite) and a worker written with its Go
// SDK (this program, run as `peers worker`); Whimbrel is `whimbrel run` on
// its embedded store and on DynamoDB Local (WHIMBREL_TEST_DYNAMODB, as
// scripts/dynamodb-local run sets it). make bench-peers builds and runs it.
//
// It lives in a Go module of its own so that Whimbrel's module does not
// take the Temporal SDK's dependencies.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(workerMain(os.Args[2:]))
	}
	os.Exit(benchMain(os.Args[1:], os.Stdout, os.Stderr))
}

// workerMain is `peers worker`: one Temporal worker and client for one
// measurement (see runWorker).
func workerMain(args []string) int {
	fs := flag.NewFlagSet("peers worker", flag.ContinueOnError)
	address := fs.String("address", "", "the Temporal frontend's host:port")
	var w work
	fs.StringVar(&w.kind, "kind", "", "the workload: "+kindFan+", "+kindChain+" or "+kindMemory)
	fs.IntVar(&w.n, "n", 0, "its size")
	fs.StringVar(&w.dir, "dir", "", "its folder")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *address == "" || w.n <= 0 {
		fmt.Fprintln(os.Stderr, "peers worker: give -address HOST:PORT and -n N (N > 0)")
		return 2
	}
	if err := runWorker(*address, w); err != nil {
		fmt.Fprintln(os.Stderr, "peers worker:", err)
		return 1
	}
	return 0
}

type options struct {
	bin      string
	temporal string
	tversion string
	sizes    []int
	chain    int
	memory   int
	rounds   int
	stores   []string
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 2
	}
	if err := bench(o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "peers:", err)
		return 1
	}
	return 0
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.bin, "bin", "bin", "folder holding the Whimbrel binaries (make native)")
	fs.StringVar(&o.temporal, "temporal", "temporal", "the Temporal CLI")
	fs.StringVar(&o.tversion, "temporal-version", "", "the Temporal CLI's version, for the report (go install builds it as 0.0.0-DEV)")
	sizes := fs.String("sizes", "125,500,2000", "fan-outs to measure, comma-separated")
	fs.IntVar(&o.chain, "chain", 21, "activities in the chain (0: no chain)")
	fs.IntVar(&o.memory, "memory", 100, "activities running at once for the memory (0: no memory)")
	fs.IntVar(&o.rounds, "rounds", 1, "runs of each measurement on each side, alternating")
	stores := fs.String("stores", "sqlite,dynamodb", "Whimbrel's stores: sqlite, dynamodb or both, comma-separated")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	// The binaries run from each measurement's own folder, so a relative
	// -bin is taken from where this program was started.
	if abs, err := filepath.Abs(o.bin); err == nil {
		o.bin = abs
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q: every setting is a flag (-h lists them)", fs.Arg(0))
	}
	for _, f := range strings.Split(*sizes, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("-sizes: %q is not a positive number of activities", f)
		}
		o.sizes = append(o.sizes, n)
	}
	for _, s := range strings.Split(*stores, ",") {
		switch s = strings.TrimSpace(s); s {
		case "sqlite", "dynamodb":
			o.stores = append(o.stores, s)
		case "":
		default:
			return o, fmt.Errorf("-stores: unknown store %q: give sqlite, dynamodb or both", s)
		}
	}
	if o.rounds <= 0 || o.chain < 0 || o.memory < 0 || o.chain == 1 {
		return o, fmt.Errorf("-rounds must be at least 1, -chain 0 or at least 2, -memory 0 or more")
	}
	return o, nil
}

func bench(o options, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program for its worker: %w", err)
	}
	for _, b := range []string{"whimbrel", "whimbrel-run"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("no %s in %s: build the binaries first (make native)", b, o.bin)
		}
	}
	if _, err := exec.LookPath(o.temporal); err != nil {
		return fmt.Errorf("the Temporal CLI %s: %w (make bench-peers installs it)", o.temporal, err)
	}
	top, err := os.MkdirTemp("", "peers")
	if err != nil {
		return fmt.Errorf("make a work folder: %w", err)
	}
	defer os.RemoveAll(top)

	fmt.Fprintf(stderr, "peers: starting %s server start-dev\n", o.temporal)
	server, err := startTemporal(o.temporal, top)
	if err != nil {
		return err
	}
	defer server.stop()
	// Interrupted (^C, make stopped), it stops the server it started and
	// leaves no work folder behind; the sides' own processes get the same
	// signal from the terminal or the process group.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			server.stop()
			_ = os.RemoveAll(top)
			os.Exit(130)
		}
	}()
	sides := []side{&temporalSide{server: server, self: self}}
	for _, st := range o.stores {
		ws := &whimbrelSide{bin: o.bin, store: st}
		if st == "dynamodb" {
			ws.endpoint = os.Getenv("WHIMBREL_TEST_DYNAMODB")
			if ws.endpoint == "" {
				return fmt.Errorf("WHIMBREL_TEST_DYNAMODB is not set: run it through scripts/dynamodb-local run (make bench-peers does), or give -stores sqlite")
			}
			if ws.storePID, err = dynamoDBLocalPID(ws.endpoint); err != nil {
				return err
			}
		}
		sides = append(sides, ws)
	}

	var works []work
	for _, n := range o.sizes {
		works = append(works, work{kind: kindFan, n: n})
	}
	if o.chain > 0 {
		works = append(works, work{kind: kindChain, n: o.chain})
	}
	if o.memory > 0 {
		works = append(works, work{kind: kindMemory, n: o.memory})
	}
	r := report{sides: sides, works: works, results: map[string]map[string][]measure{}, began: time.Now().UTC()}
	r.versions = versions(o)
	r.command = "make bench-peers"
	r.rounds = o.rounds
	if err := measureAll(o, sides, works, top, &r, stderr); err != nil {
		// What was measured before the failure is printed all the same:
		// on a loaded machine a run takes long, and its first rounds are
		// worth keeping.
		r.ended = time.Now().UTC()
		fmt.Fprintf(stderr, "peers: measured before the failure:\n%s", r.markdown())
		return err
	}
	r.ended = time.Now().UTC()
	_, err = io.WriteString(stdout, r.markdown())
	return err
}

// measureAll runs every workload on every side, round by round, into r.
func measureAll(o options, sides []side, works []work, top string, r *report, stderr io.Writer) error {
	seq := 0
	for round := 0; round < o.rounds; round++ {
		for _, w := range works {
			// Each side takes its turn right after the others on the same
			// workload, and who goes first moves round by round, so that
			// all see the same load.
			for i := range sides {
				sd := sides[(i+round)%len(sides)]
				seq++
				w.dir = filepath.Join(top, strconv.Itoa(seq))
				if err := os.Mkdir(w.dir, 0o755); err != nil {
					return fmt.Errorf("make a work folder: %w", err)
				}
				fmt.Fprintf(stderr, "peers: round %d, %s, %s …", round+1, w.label(), sd.name())
				m, err := sd.run(w)
				if err != nil {
					fmt.Fprintln(stderr)
					return fmt.Errorf("%s, %s: %w", w.label(), sd.name(), err)
				}
				if w.kind == kindChain {
					if m.hops, err = readHops(w.dir, w.n); err != nil {
						fmt.Fprintln(stderr)
						return fmt.Errorf("%s, %s: %w", w.label(), sd.name(), err)
					}
				}
				fmt.Fprintf(stderr, " %s (load %.1f)\n", m.wall.Round(10*time.Millisecond), m.load[1])
				r.add(w, sd, m)
				_ = os.RemoveAll(w.dir)
			}
		}
		if round+1 < o.rounds {
			r.ended = time.Now().UTC()
			fmt.Fprintf(stderr, "peers: after round %d:\n%s", round+1, r.markdown())
		}
	}
	return nil
}

// versions names what was measured: the Temporal CLI (with its server),
// the Go SDK this worker was built with, and the Whimbrel binaries.
func versions(o options) []string {
	var vs []string
	if out, err := exec.Command(o.temporal, "--version").Output(); err == nil {
		v := strings.TrimSpace(string(out))
		if o.tversion != "" {
			v = strings.Replace(v, "0.0.0-DEV", o.tversion, 1)
		}
		vs = append(vs, v)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "go.temporal.io/sdk" {
				vs = append(vs, "Temporal Go SDK "+d.Version+" (the worker, "+bi.GoVersion+")")
			}
		}
	}
	if out, err := exec.Command(filepath.Join(o.bin, "whimbrel"), "--version").Output(); err == nil {
		vs = append(vs, "whimbrel "+strings.TrimSpace(string(out)))
	}
	return vs
}
