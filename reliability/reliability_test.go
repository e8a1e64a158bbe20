package reliability

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/clock"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

var bin string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		bin = dir
		return m.Run()
	}, []string{"-tags", "whimbrel_fault"}, map[string]string{"whimbrel-run": "../cmd/whimbrel-run", "whimbrel-launcher": "../cmd/whimbrel-launcher",
		"whimbrel-monitor": "../cmd/whimbrel-monitor"})
}

func size() int {
	if n, err := strconv.Atoi(os.Getenv("WHIMBREL_RELIABILITY_SIZE")); err == nil && n > 0 {
		return n
	}
	return 60
}

// settleTime bounds the wait for a suite's workflows to settle: 5 min,
// and a minute more for every 100 activities past 500.
func settleTime() time.Duration {
	return 5*time.Minute + time.Duration(max(size()-500, 0)/100)*time.Minute
}

// fleet is a set of participant processes that can be killed and
// restarted.
type fleet struct {
	t    *testing.T
	env  []string
	mu   sync.Mutex
	cmds map[string]*exec.Cmd // by name
	args map[string][]string
	// clocks offsets each participant's clock (clock.Env), by name; a
	// launcher's wrappers inherit its clock, as on one host.
	clocks map[string]time.Duration
}

func newFleet(t *testing.T, env []string) *fleet {
	f := &fleet{t: t, env: env, cmds: map[string]*exec.Cmd{}, args: map[string][]string{}, clocks: map[string]time.Duration{}}
	t.Cleanup(f.stopAll)
	return f
}

// skewed starts a participant whose clock is off by offset.
func (f *fleet) skewed(offset time.Duration, name string, args ...string) {
	f.mu.Lock()
	f.clocks[name] = offset
	f.mu.Unlock()
	f.start(name, args...)
}

func (f *fleet) start(name string, args ...string) {
	f.t.Helper()
	if d := os.Getenv("WHIMBREL_RELIABILITY_LOGS"); d != "" {
		// The wrappers' logs there too.
		for i := range args[:len(args)-1] {
			if args[i] == "--log-dir" {
				args = append(append([]string{}, args[:i+1]...), append([]string{d}, args[i+2:]...)...)
			}
		}
	}
	cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
	f.mu.Lock()
	offset := f.clocks[name]
	f.mu.Unlock()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "WHIMBREL_LOG_LEVEL=warn", clock.Env + "=" + offset.String()}, f.env...)
	cmd.Stderr = nil
	if d := os.Getenv("WHIMBREL_RELIABILITY_LOGS"); d != "" {
		// Each participant's log, for a person looking into a failure.
		if lf, err := os.OpenFile(filepath.Join(d, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			cmd.Stderr = lf
			defer lf.Close()
		}
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	f.mu.Lock()
	f.cmds[name], f.args[name] = cmd, args
	f.mu.Unlock()
}

// kill kills a participant with SIGKILL and starts it again.
func (f *fleet) kill(name string) {
	f.mu.Lock()
	cmd, args := f.cmds[name], f.args[name]
	f.mu.Unlock()
	_ = cmd.Process.Kill()
	f.start(name, args...)
}

func (f *fleet) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.cmds))
	for n := range f.cmds {
		out = append(out, n)
	}
	return out
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
}

// Timeouts of the definitions: short where participants are killed, so
// that the monitor recovers their activities quickly; generous where none
// is, so that a loaded machine never ends an attempt that would have run.
// With a 2 s lease a wrapper has 1 s (half the lease: it does not beat
// yet) to read its upstreams' outputs before it starts the command; a
// loaded CI machine once took longer for the join's 36 upstream items, and
// each attempt failed "command not started", as it must.
const (
	killedTimeouts = "heartbeat_interval: 300ms, heartbeat_timeout: 2s, queued_timeout: 5s, kill_grace: 1s"
	calmTimeouts   = "heartbeat_interval: 300ms, heartbeat_timeout: 30s, queued_timeout: 2m, kill_grace: 1s"
)

// fanOut builds a workflow of n activities: a root, a fan-out, a join.
func fanOut(t *testing.T, name string, n int, timeouts, command, extra string) *definition.Workflow {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\ndefaults: {%s}\nactivities:\n", name, timeouts)
	fmt.Fprintf(&b, "  root: {command: [sh, -c, '%s']%s}\n", command, extra)
	var mids []string
	for i := 0; i < n-2; i++ {
		fmt.Fprintf(&b, "  m%03d: {command: [sh, -c, '%s'], depends_on: [root]%s}\n", i, command, extra)
		mids = append(mids, fmt.Sprintf("m%03d", i))
	}
	fmt.Fprintf(&b, "  join: {command: [sh, -c, '%s'], depends_on: [%s]%s}\n", command, strings.Join(mids, ", "), extra)
	d, err := definition.Parse(name+".yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runs reads the log the commands append their activity IDs to.
func runs(t *testing.T, path string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if l := strings.TrimSpace(s.Text()); l != "" {
			out[l]++
		}
	}
	return out
}

func settle(t *testing.T, st state.Store, ids []string, timeout time.Duration) []*state.WorkflowExec {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var wfs []*state.WorkflowExec
		done := 0
		for _, id := range ids {
			wf, err := st.GetWorkflow(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			wfs = append(wfs, wf)
			if wf.State.Terminal() {
				done++
			}
		}
		if done == len(ids) {
			return wfs
		}
		if time.Now().After(deadline) {
			for _, wf := range wfs {
				if !wf.State.Terminal() {
					acts, _ := st.Activities(context.Background(), wf.WorkflowExecID)
					var live []string
					for _, a := range acts {
						if !a.State.Terminal() {
							live = append(live, fmt.Sprintf("%s %s (%s; owner %q)", a.ActivityName, a.State, a.Reason, a.Owner))
						}
					}
					t.Logf("%s is %s; not ended: %s", wf.WorkflowExecID, wf.State, strings.Join(live, "; "))
				}
			}
			t.Fatalf("%d of %d workflows settled within %s", done, len(ids), timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestExactlyOnce: 8 launchers and 4 monitors, as separate processes,
// over size() activities: every activity runs exactly once, none is lost,
// every workflow completes. In every other workflow each activity fails
// its first attempt and is retried (retry.max_attempts 3): every attempt
// runs exactly once, and each of those activities has exactly 2.
func TestExactlyOnce(t *testing.T) {
	r := newRig(t, "")
	st := r.st
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	f := newFleet(t, r.env)
	// The monitors keep whimbrel-monitor's default --skew: clocks may
	// disagree by half of it.
	for i := 0; i < 8; i++ {
		f.skewed(r.clock(i), fmt.Sprintf("launcher-%d", i), "whimbrel-launcher", "--interval", "200ms", "--log-dir", dir)
	}
	for i := 0; i < 4; i++ {
		f.skewed(r.monitorClock(), fmt.Sprintf("monitor-%d", i), "whimbrel-monitor", "--interval", "1s")
	}
	per := 20
	var ids []string
	total, items := 0, 0
	retried := map[string]bool{}
	for total < size() {
		n := min(per, size()-total)
		if n < 3 {
			n = 3
		}
		command, extra := `echo $WHIMBREL_ACTIVITY_EXEC_ID >> `+log, ""
		if len(ids)%2 == 1 {
			// The first attempt of each activity leaves a mark and fails;
			// the retry finds the mark and succeeds.
			command += `; m=` + dir + `/$(echo $WHIMBREL_WORKFLOW_EXEC_ID.$WHIMBREL_ACTIVITY_NAME | tr : _); test -e $m || { touch $m; exit 1; }`
			extra = `, retry: {max_attempts: 3, interval: 200ms, jitter: full}`
		}
		d := fanOut(t, fmt.Sprintf("once%d", len(ids)), n, calmTimeouts, command, extra)
		id, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		retried[id] = extra != ""
		ids = append(ids, id)
		total += n
		items += n
		if extra != "" {
			items += n
		}
	}
	wfs := settle(t, st, ids, settleTime())
	seen := runs(t, log)
	ran := 0
	for _, wf := range wfs {
		if wf.State != state.WorkflowCompleted {
			t.Errorf("workflow %s is %s: %s", wf.WorkflowExecID, wf.State, wf.Reason)
		}
		acts, err := st.Activities(context.Background(), wf.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		perName := map[string]int{}
		for _, a := range acts {
			ran++
			perName[a.ActivityName]++
			if !a.State.Terminal() || a.State == state.TimedOut {
				t.Errorf("%s is %s (%s) in a settled workflow", a.ActivityExecID, a.State, a.Reason)
			}
			if n := seen[a.ActivityExecID]; n != 1 {
				t.Errorf("%s ran %d times: %s (%s), queued %s, started %s, owner %q, launched as %q",
					a.ActivityExecID, n, a.State, a.Reason, a.QueuedTime.Format(time.StampMilli),
					a.StartTime.Format(time.StampMilli), a.Owner, a.LaunchedAs)
			}
		}
		for name, n := range perName {
			if want := map[bool]int{false: 1, true: 2}[retried[wf.WorkflowExecID]]; n != want {
				t.Errorf("%s %s has %d attempts, want %d", wf.WorkflowExecID, name, n, want)
			}
		}
	}
	if ran != items || len(seen) != items {
		t.Errorf("%d attempts recorded, %d ran; want %d", ran, len(seen), items)
	}
	t.Logf("%d activities (%d attempts) in %d workflows, 8 launchers and 4 monitors: each attempt ran once", total, items, len(ids))
	r.report(t)
}

// TestCrashes: while workflows run, wrappers, launchers and monitors are
// killed with SIGKILL at random moments (launchers and monitors come back).
// Every workflow still settles, consistently with its activities, and no
// activity runs twice.
func TestCrashes(t *testing.T) {
	r := newRig(t, "")
	r.tolerance = crashSkew
	st := r.st
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	f := newFleet(t, r.env)
	for i := 0; i < 3; i++ {
		f.skewed(r.clock(i), fmt.Sprintf("launcher-%d", i), "whimbrel-launcher", "--interval", "300ms", "--log-dir", dir)
	}
	for i := 0; i < 2; i++ {
		// One page of adoption: the chaos kills each monitor every few
		// seconds, and a sweep must get past its adoption scan (10 calls a
		// table in the proxy's pages of 5) to judge anything.
		f.skewed(r.monitorClock(), fmt.Sprintf("monitor-%d", i), "whimbrel-monitor", "--interval", "500ms", "--skew", crashSkew.String(), "--queued-timeout", "5s", "--adopt-pages", "1")
	}
	var ids []string
	total := 0
	for total < size() {
		n := min(15, max(3, size()-total))
		// The command sleeps a little so that kills find it running; the
		// ID is written before, so a killed wrapper's orphaned command is
		// still counted once.
		d := fanOut(t, fmt.Sprintf("crash%d", len(ids)), n, killedTimeouts, `echo $WHIMBREL_ACTIVITY_EXEC_ID >> `+log+`; sleep 0.$((RANDOM % 8 + 2))`, "")
		id, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		total += n
	}

	// Chaos until everything settled.
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	killed := map[string]int{}
	var kmu sync.Mutex
	chaos.Add(1)
	go func() {
		defer chaos.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(200+r.IntN(400)) * time.Millisecond):
			}
			// In turn: a wrapper, a launcher, a wrapper, a monitor.
			if kind := map[int]string{1: "launcher", 3: "monitor"}[i%4]; kind != "" {
				var of []string
				for _, n := range f.names() {
					if strings.HasPrefix(n, kind) {
						of = append(of, n)
					}
				}
				victim := of[r.IntN(len(of))]
				f.kill(victim)
				kmu.Lock()
				killed[strings.SplitN(victim, "-", 2)[0]]++
				kmu.Unlock()
				continue
			}
			// A running wrapper.
			refs, err := st.ActivitiesInState(context.Background(), state.ActivityQuery{State: state.Running})
			if err != nil || len(refs) == 0 {
				continue
			}
			a, err := st.GetActivity(context.Background(), refs[r.IntN(len(refs))].ActivityKey)
			if err != nil || !strings.HasPrefix(a.LaunchedAs, "pid:") {
				continue
			}
			pid, _ := strconv.Atoi(strings.TrimPrefix(a.LaunchedAs, "pid:"))
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				kmu.Lock()
				killed["wrapper"]++
				kmu.Unlock()
			}
		}
	}()
	wfs := settle(t, st, ids, settleTime())
	close(stop)
	chaos.Wait()

	seen := runs(t, log)
	outcomes := map[state.WorkflowState]int{}
	for _, wf := range wfs {
		outcomes[wf.State]++
		acts, err := st.Activities(context.Background(), wf.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		completed := 0
		for _, a := range acts {
			if !a.State.Terminal() {
				t.Errorf("%s is %s in a settled workflow", a.ActivityExecID, a.State)
			}
			if a.State == state.Completed {
				completed++
			}
			if n := seen[a.ActivityExecID]; n > 1 {
				t.Errorf("%s ran %d times", a.ActivityExecID, n)
			}
			if a.State == state.Completed && seen[a.ActivityExecID] != 1 {
				t.Errorf("%s COMPLETED without running", a.ActivityExecID)
			}
		}
		if (wf.State == state.WorkflowCompleted) != (completed == len(acts)) {
			t.Errorf("workflow %s is %s with %d of %d activities completed", wf.WorkflowExecID, wf.State, completed, len(acts))
		}
	}
	t.Logf("%d activities in %d workflows; killed %v; workflows %v", total, len(ids), killed, outcomes)
	r.report(t)
	if killed["wrapper"] == 0 || killed["launcher"] == 0 || killed["monitor"] == 0 {
		t.Errorf("the chaos killed too little to mean anything: %v", killed)
	}
}
