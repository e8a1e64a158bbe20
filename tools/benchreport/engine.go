package main

// The engine's figures, build beside build: the CPU per activity of every
// Whimbrel process (a whimbrel-launcher, the wrappers it starts, a
// whimbrel-monitor), the activities per second of one launcher, and the
// DAG hop, on the embedded store and on DynamoDB Local, with the binaries
// of -before and of -bin alternating in one run.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// onlyEngine measures and prints the engine's section only.
var onlyEngine bool

// engineRounds is how many times each build is measured on each store.
var engineRounds = 2

// engineChain is the length of the chain whose hops are measured.
const engineChain = 21

// engineRun is one build's figures on one store.
type engineRun struct {
	perSecond float64       // activities completed per second by one launcher
	cpu       time.Duration // per activity: launcher, wrappers, commands, monitor
	launcher  time.Duration // per activity: the launcher's own process, without its children
	monitor   time.Duration // per activity: the monitor's process
	hops      []time.Duration
}

// engineStore is a fresh store for one measurement: what the processes
// are handed to reach it, and the store itself for benchreport's own
// start and wait.
type engineStore struct {
	env   []string
	st    state.Store
	close func()
}

func newEngineStore(ctx context.Context, kind, endpoint string) (*engineStore, error) {
	if kind == "dynamodb" {
		prefix := "eng_" + uuid.NewString()[:8] + "_"
		st := dynamodb.New(client(endpoint), dynamodb.Options{Prefix: prefix})
		if _, err := st.Install(ctx, false); err != nil {
			return nil, err
		}
		return &engineStore{env: storeEnv(prefix, endpoint), st: st, close: func() {}}, nil
	}
	dir, err := os.MkdirTemp("", "engine")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "state.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := st.Install(ctx, false); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "WHIMBREL_LOG_LEVEL=warn", "WHIMBREL_STORE=sqlite:" + path}
	return &engineStore{env: env, st: st, close: func() { st.Close(); os.RemoveAll(dir) }}, nil
}

// startProc starts one Whimbrel process of bin on es, passing on
// WHIMBREL_CPUPROFILE.
func startProc(bin, name string, es *engineStore, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = withSupervise(append([]string(nil), es.env...))
	if p := os.Getenv("WHIMBREL_CPUPROFILE"); p != "" {
		cmd.Env = append(cmd.Env, "WHIMBREL_CPUPROFILE="+p)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd, cmd.Start()
}

// stopProc stops a process with SIGTERM (so that it writes its profile)
// and returns its CPU and that of every process it reaped, and its own
// CPU alone (as /proc says just before it is stopped).
func stopProc(cmd *exec.Cmd) (all, own time.Duration) {
	own = procCPU(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		all = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return all, own
}

// procCPU is the user + system time of the process pid itself, without
// its children, from /proc/PID/stat (0 if it cannot be read).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: state is the first, utime the 12th, stime the 13th.
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's times: 100 on Linux.
const clockTicks = 100

// runWorkflow starts def on es and waits for it to complete.
func runWorkflow(ctx context.Context, es *engineStore, d *definition.Workflow) error {
	id, _, err := workflow.Start(ctx, es.st, d, workflow.StartOptions{})
	if err != nil {
		return err
	}
	return waitWorkflow(ctx, es, id)
}

// waitWorkflow waits for the workflow id on es to complete, reading it
// every 20 ms, and fails if it ends otherwise or runs past 10 minutes.
func waitWorkflow(ctx context.Context, es *engineStore, id string) error {
	began := time.Now()
	for {
		wf, err := es.st.GetWorkflow(ctx, id)
		if err != nil {
			return err
		}
		if wf.State.Terminal() {
			if wf.State != state.WorkflowCompleted {
				return fmt.Errorf("workflow %s: %s", wf.State, wf.Reason)
			}
			return nil
		}
		if time.Since(began) > 10*time.Minute {
			return fmt.Errorf("workflow %s did not finish in 10 minutes", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measureEngine runs n ready `true` activities, then a chain of
// engineChain, through one whimbrel-launcher and one whimbrel-monitor of
// bin on a fresh store of kind.
func measureEngine(ctx context.Context, bin, kind, endpoint string, n int) (engineRun, error) {
	var res engineRun
	es, err := newEngineStore(ctx, kind, endpoint)
	if err != nil {
		return res, err
	}
	defer es.close()
	logs, err := os.MkdirTemp("", "engine-logs")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(logs)
	d, err := trueActivities("trivial", "t%04d", n)
	if err != nil {
		return res, err
	}
	l, err := startProc(bin, "whimbrel-launcher", es, "--log-dir", logs)
	if err != nil {
		return res, err
	}
	m, err := startProc(bin, "whimbrel-monitor", es)
	if err != nil {
		stopProc(l)
		return res, err
	}
	began := time.Now()
	err = runWorkflow(ctx, es, d)
	took := time.Since(began)
	lc, lown := stopProc(l)
	mc, _ := stopProc(m)
	if err != nil {
		return res, err
	}
	res.perSecond = float64(n) / took.Seconds()
	res.cpu, res.launcher, res.monitor = (lc+mc)/time.Duration(n), lown/time.Duration(n), mc/time.Duration(n)

	res.hops, err = measureHops(ctx, bin, es, logs)
	return res, err
}

// measureHops runs a chain whose commands write their start and end times
// through a fresh launcher of bin on es, and returns its hops: each
// command's start after its upstream's end.
func measureHops(ctx context.Context, bin string, es *engineStore, logs string) ([]time.Duration, error) {
	dir, err := os.MkdirTemp("", "hops")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	d, err := definition.Parse("hop.yaml", []byte(hopChain(dir)))
	if err != nil {
		return nil, err
	}
	l, err := startProc(bin, "whimbrel-launcher", es, "--log-dir", logs)
	if err != nil {
		return nil, err
	}
	err = runWorkflow(ctx, es, d)
	stopProc(l)
	if err != nil {
		return nil, err
	}
	return chainHops(dir)
}

// hopChain is the definition of a chain of engineChain activities whose
// commands write their start and end times (in ns) into dir.
func hopChain(dir string) string {
	var def strings.Builder
	def.WriteString("name: hop\nactivities:\n")
	for j := 0; j < engineChain; j++ {
		fmt.Fprintf(&def, "  s%02d:\n    command: [sh, -c, 'date +%%s%%N > %s/s%02d.start; date +%%s%%N > %s/s%02d.end']\n", j, dir, j, dir, j)
		if j > 0 {
			fmt.Fprintf(&def, "    depends_on: [s%02d]\n", j-1)
		}
	}
	return def.String()
}

// chainHops reads the times hopChain's commands wrote into dir and
// returns the hops: each command's start after its upstream's end.
func chainHops(dir string) ([]time.Duration, error) {
	stamp := func(j int, what string) (time.Time, error) {
		raw, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s%02d.%s", j, what)))
		if err != nil {
			return time.Time{}, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		return time.Unix(0, ns), err
	}
	var hops []time.Duration
	for j := 1; j < engineChain; j++ {
		end, err := stamp(j-1, "end")
		if err != nil {
			return nil, err
		}
		start, err := stamp(j, "start")
		if err != nil {
			return nil, err
		}
		hops = append(hops, start.Sub(end))
	}
	return hops, nil
}

// printEngine measures the builds of before (if given) and bin on both
// stores, alternating, engineRounds times, and prints the engine's
// section.
func printEngine(ctx context.Context, w io.Writer, bin, before, endpoint string, n int) error {
	builds := []string{bin}
	if before != "" {
		builds = []string{before, bin}
	}
	got := map[string]map[string][]engineRun{} // by store, by build
	for _, kind := range []string{"sqlite", "dynamodb"} {
		got[kind] = map[string][]engineRun{}
		for round := 0; round < engineRounds; round++ {
			for _, b := range builds {
				r, err := measureEngine(ctx, b, kind, endpoint, n)
				if err != nil {
					return fmt.Errorf("engine on %s with %s: %w", kind, b, err)
				}
				got[kind][b] = append(got[kind][b], r)
			}
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }
	fmt.Fprintf(w, "## The engine, build beside build: CPU per activity, throughput, hop\n\n")
	fmt.Fprintf(w, "Measured on %s by `scripts/dynamodb-local run -- go run ./tools/benchreport -engine -bin DIR -before DIR0` (each build %d times on each store, alternating; load average %s at the end). %d ready `true` activities through one `whimbrel-launcher` (default flags, `--log-dir`) with one `whimbrel-monitor` beside it; CPU is user + system of the launcher, every process it reaped (the wrappers and their commands) and the monitor, per activity. Then a chain of %d activities through a fresh launcher on the same store: the hop is a command's start after its upstream's end.\n\n",
		time.Now().UTC().Format("2006-01-02"), engineRounds, loadAverage1(), n, engineChain)
	fmt.Fprintf(w, "| store | binaries | activities per second | CPU per activity | of it the launcher's own process | the monitor's | the wrappers and commands | hop p50 | hop p95 |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, kind := range []string{"sqlite", "dynamodb"} {
		for _, b := range builds {
			for _, r := range got[kind][b] {
				sort.Slice(r.hops, func(i, j int) bool { return r.hops[i] < r.hops[j] })
				fmt.Fprintf(w, "| %s | %s | %.1f | %s ms | %s ms | %s ms | %s ms | %s ms | %s ms |\n", kind, b, r.perSecond, ms(r.cpu), ms(r.launcher), ms(r.monitor),
					ms(r.cpu-r.launcher-r.monitor), ms(r.hops[len(r.hops)/2]), ms(r.hops[len(r.hops)*95/100]))
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// loadAverage1 is the machine's 1-minute load average, as /proc says.
func loadAverage1() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}
