package local_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/monitor"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// poolStore is a store for the pool tests, and the environment its
// wrappers reach it with. clean reaches the same tables without faults:
// the test's own setup and checks go through it, for a call the fault
// proxy fails after the SDK's tries is no part of what a test proves.
type poolStore struct {
	st    state.Store
	clean state.Store
	env   []string
}

// poolStores are the stores the pool tests run on: DynamoDB behind the
// fault proxy (throttling, 500s after applied writes, lagging indexes)
// and the embedded store.
func poolStores(t *testing.T) map[string]func(t *testing.T) poolStore {
	return map[string]func(t *testing.T) poolStore{
		"dynamodb-behind-fault-proxy": func(t *testing.T) poolStore {
			p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
			prefix := dynamotest.Prefix(t)
			clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := clean.Install(ctx, false); err != nil {
				t.Fatalf("install tables: %v", err)
			}
			p.SetFaults(dynamotest.Faults{Throttle: 0.03, Errors: 0.02, AfterWrite: 0.5, IndexLag: 300 * time.Millisecond})
			st := dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
			return poolStore{st: st, clean: clean, env: p.Env(t, prefix)}
		},
		"sqlite": func(t *testing.T) poolStore {
			path := filepath.Join(t.TempDir(), "state.db")
			st, err := sqlite.Open(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			if _, err := st.Install(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			return poolStore{st: st, clean: st, env: []string{"WHIMBREL_STORE=sqlite:" + path}}
		},
	}
}

// runLaunchers runs n launchers on the local backend until the test ends.
func runLaunchers(t *testing.T, ps poolStore, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var backends []*local.Backend
	for range n {
		lb := &local.Backend{Wrapper: wrapper, LogDir: t.TempDir(), Env: append(append([]string(nil), ps.env...), "PATH="+os.Getenv("PATH"))}
		backends = append(backends, lb)
		l := launcher.New(ps.st, launcher.Config{
			Backends: map[string]launcher.Backend{definition.LaunchLocal: lb},
			Interval: 150 * time.Millisecond,
		})
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, b := range backends {
			b.Wait()
		}
	})
}

// runMonitor runs a monitor until the test ends.
func runMonitor(t *testing.T, st state.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := monitor.New(st, monitor.Config{Interval: 300 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// sampleHeld samples the pool's held slots until stop is closed and
// returns the most it saw.
func sampleHeld(t *testing.T, st state.Store, pool string, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(10 * time.Millisecond):
			}
			s, err := state.ReadPool(context.Background(), st.(state.PoolStore), pool)
			if err == nil {
				most = max(most, s.Held)
			}
		}
	}()
	return out
}

// span is one run of a command, from the log the commands write.
type span struct {
	id         string
	start, end int64
}

// readSpans reads the log of "start|end <ns> <activity_exec_id>" lines.
func readSpans(t *testing.T, path string) map[string]*span {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*span{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 3 {
			t.Fatalf("log line %q", sc.Text())
		}
		ns, err := strconv.ParseInt(fs[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s := out[fs[2]]
		if s == nil {
			s = &span{id: fs[2]}
			out[fs[2]] = s
		}
		switch fs[0] {
		case "start":
			if s.start != 0 {
				t.Errorf("%s started twice", fs[2])
			}
			s.start = ns
		case "end":
			s.end = ns
		}
	}
	return out
}

// mostAtOnce is the most spans running at once, weighted, at every
// change.
func mostAtOnce(spans map[string]*span, weight func(id string) int) int {
	type ev struct {
		at int64
		d  int
	}
	var evs []ev
	for _, s := range spans {
		evs = append(evs, ev{s.start, weight(s.id)}, ev{s.end, -weight(s.id)})
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].d < evs[j].d // an end before a start at the same instant
	})
	n, most := 0, 0
	for _, e := range evs {
		n += e.d
		most = max(most, n)
	}
	return most
}

func logCommand(log string, sleep string) string {
	return fmt.Sprintf(`[sh, -c, 'echo "start $(date +%%s%%N) $WHIMBREL_ACTIVITY_EXEC_ID" >> %s; sleep %s; echo "end $(date +%%s%%N) $WHIMBREL_ACTIVITY_EXEC_ID" >> %s']`, log, sleep, log)
}

// TestPoolFortyInThreeUnderFourLaunchers: 40 activities, in 40 workflows
// started one after another, in a pool of 3, launched by 4 launchers:
// never more than 3 run (from the commands' own start and end times, at
// every change, and from the pool sampled), all complete, they start
// oldest first, and no slot is left held. A second workflow's activities
// hold 2 slots each of another pool of 3: one runs at a time.
func TestPoolFortyInThreeUnderFourLaunchers(t *testing.T) {
	t.Parallel()
	for name, newStore := range poolStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := newStore(t)
			ctx := launchtest.Context(t)
			pools := ps.clean.(state.PoolStore)
			for pool, n := range map[string]int{"warehouse": 3, "gpu": 3} {
				if _, err := state.SetPool(ctx, pools, pool, n, "", time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			log := filepath.Join(t.TempDir(), "runs.log")
			var ids []string
			for range 40 {
				id, _ := launchtest.Start(t, ps.clean, "name: pooled\nactivities:\n  job:\n    pool: warehouse\n    command: "+logCommand(log, "0.2")+"\n")
				ids = append(ids, id)
			}
			twos, _ := launchtest.Start(t, ps.clean, "name: twos\ndefaults: {pool: gpu, pool_slots: 2}\nactivities:\n"+
				"  a: {command: "+logCommand(log, "0.2")+"}\n  b: {command: "+logCommand(log, "0.2")+"}\n  c: {command: "+logCommand(log, "0.2")+"}\n")

			stop := make(chan struct{})
			heldWh := sampleHeld(t, ps.clean, "warehouse", stop)
			heldGpu := sampleHeld(t, ps.clean, "gpu", stop)
			runLaunchers(t, ps, 4)
			// A wrapper's advance that fails past the SDK's retries (the
			// fault proxy's errors) leaves settling to the monitor.
			runMonitor(t, ps.st)
			for _, id := range append(ids, twos) {
				if wf := launchtest.WaitSettled(t, ps.clean, id, 4*time.Minute); wf.State != state.WorkflowCompleted {
					t.Fatalf("workflow %s: %s %s", id, wf.State, wf.Reason)
				}
			}
			close(stop)
			if most := <-heldWh; most > 3 || most == 0 {
				t.Errorf("sampled %d slots of warehouse held at most, want 1 to 3", most)
			}
			if most := <-heldGpu; most > 2 {
				t.Errorf("sampled %d slots of gpu held at most, want 2", most)
			}

			spans := readSpans(t, log)
			wh := map[string]*span{}
			gpu := map[string]*span{}
			for id, s := range spans {
				if strings.HasPrefix(id, "job::") {
					wh[id] = s
				} else {
					gpu[id] = s
				}
			}
			if len(wh) != 40 || len(gpu) != 3 {
				t.Fatalf("%d warehouse and %d gpu runs logged, want 40 and 3", len(wh), len(gpu))
			}
			if most := mostAtOnce(wh, func(string) int { return 1 }); most > 3 {
				t.Errorf("%d warehouse activities ran at once in a pool of 3", most)
			}
			if most := mostAtOnce(gpu, func(string) int { return 2 }); most > 3 {
				t.Errorf("%d gpu slots were in use at once in a pool of 3 (2 each)", most)
			}
			// Oldest first: an activity starts after at most 2 (the
			// pool's size less one) of those readied before it. Behind
			// the fault proxy a wrapper's own claim can be throttled and
			// retried for seconds after the launcher let it into the
			// pool, so there the order judged is the launchers' (the
			// queued time each claim wrote), which is what the pool's
			// order governs.
			faulty := name == "dynamodb-behind-fault-proxy"
			var order []*span
			var queued []time.Time
			for _, id := range ids {
				a := launchtest.Activity(t, ps.clean, id, "job")
				order = append(order, wh[a.ActivityExecID])
				queued = append(queued, a.QueuedTime)
			}
			for i, s := range order {
				t.Logf("%2d %s queued %s start %d", i, s.id, queued[i].Format("15:04:05.000"), s.start/1e6%100000)
				overtaken := 0
				for j, older := range order[:i] {
					if (!faulty && older.start > s.start) || (faulty && queued[j].After(queued[i])) {
						overtaken++
					}
				}
				if overtaken > 2 {
					t.Errorf("the activity readied %d-th (%s) started before %d readied earlier", i+1, s.id, overtaken)
				}
			}
			// Behind the fault proxy a release can fail past the SDK's
			// retries; the slot is then freed by the monitor's sweep
			// once its lease (a minute) has lapsed, so there no slot may
			// be left held once the sweep has had its time. Elsewhere
			// every release lands as its activity ends.
			wait := time.Duration(0)
			if faulty {
				wait = 3 * time.Minute
			}
			for _, pool := range []string{"warehouse", "gpu"} {
				deadline := time.Now().Add(wait)
				for {
					s, _ := state.ReadPool(ctx, pools, pool)
					if s != nil && s.Held == 0 {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("pool %s after every run: %+v", pool, s)
						break
					}
					time.Sleep(time.Second)
				}
			}
		})
	}
}

// TestPoolKilledWrapperFreesItsSlot: the wrapper holding the only slot
// is killed with SIGKILL; the monitor times its activity out, which frees
// the slot, and the next activity runs only then.
func TestPoolKilledWrapperFreesItsSlot(t *testing.T) {
	t.Parallel()
	for name, newStore := range poolStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := newStore(t)
			ctx := launchtest.Context(t)
			if _, err := state.SetPool(ctx, ps.clean.(state.PoolStore), "one", 1, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			first, _ := launchtest.Start(t, ps.clean, "name: first\ndefaults: {heartbeat_interval: 1s, heartbeat_timeout: 3s}\nactivities:\n  hold: {pool: one, command: [sh, -c, 'echo $$ > "+pidFile+"; exec sleep 300']}\n")
			runLaunchers(t, ps, 2)
			runMonitor(t, ps.st)

			var held *state.ActivityExec
			deadline := time.Now().Add(2 * time.Minute)
			for held == nil || held.State != state.Running || held.PID == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the first activity never ran: %+v", held)
				}
				time.Sleep(50 * time.Millisecond)
				held = launchtest.Activity(t, ps.clean, first, "hold")
			}
			child := testbin.PIDFile(t, pidFile)
			t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
			second, _ := launchtest.Start(t, ps.clean, "name: second\nactivities:\n  next: {pool: one, command: ['true']}\n")
			time.Sleep(time.Second) // a few passes of both launchers
			if a := launchtest.Activity(t, ps.clean, second, "next"); a.State != state.Ready {
				t.Fatalf("the second activity is %s while the only slot is held", a.State)
			}
			if err := syscall.Kill(held.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if wf := launchtest.WaitSettled(t, ps.clean, second, 2*time.Minute); wf.State != state.WorkflowCompleted {
				t.Fatalf("second: %s %s", wf.State, wf.Reason)
			}
			hold := launchtest.Activity(t, ps.clean, first, "hold")
			next := launchtest.Activity(t, ps.clean, second, "next")
			if hold.State != state.TimedOut {
				t.Errorf("the killed wrapper's activity is %s, want TIMED_OUT", hold.State)
			}
			if next.StartTime.Before(hold.EndTime) {
				t.Errorf("the second started at %s, before the first timed out at %s", next.StartTime, hold.EndTime)
			}
			if s, _ := state.ReadPool(ctx, ps.clean.(state.PoolStore), "one"); s == nil || s.Held != 0 {
				t.Errorf("pool after both: %+v", s)
			}
		})
	}
}

// stuckBackend never returns from a launch until the test ends: a
// launcher that died between its claim and its launch, as far as the
// store can tell.
type stuckBackend struct{ release chan struct{} }

func (b *stuckBackend) Launch(ctx context.Context, j launcher.Job) (string, error) {
	<-b.release
	return "", fmt.Errorf("stopped")
}

// TestPoolLauncherDiedBetweenClaimAndLaunch: the only slot is taken by an
// activity whose launcher never launches it; the monitor fails it at its
// queued timeout, which frees the slot, and the next activity runs.
func TestPoolLauncherDiedBetweenClaimAndLaunch(t *testing.T) {
	t.Parallel()
	for name, newStore := range poolStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ps := newStore(t)
			ctx := launchtest.Context(t)
			if _, err := state.SetPool(ctx, ps.clean.(state.PoolStore), "one", 1, "", time.Now()); err != nil {
				t.Fatal(err)
			}
			first, _ := launchtest.Start(t, ps.clean, "name: first\nactivities:\n  hold: {pool: one, queued_timeout: 3s, command: ['true']}\n")
			stuck := &stuckBackend{release: make(chan struct{})}
			sctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = launcher.New(ps.st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchLocal: stuck},
					Interval: 100 * time.Millisecond, CallTimeout: time.Hour, RetryFor: time.Hour}).Run(sctx)
			}()
			t.Cleanup(func() { stop(); close(stuck.release); <-done })
			deadline := time.Now().Add(2 * time.Minute)
			for launchtest.Activity(t, ps.clean, first, "hold").State != state.Queued {
				if time.Now().After(deadline) {
					t.Fatal("the stuck launcher never claimed the activity")
				}
				time.Sleep(50 * time.Millisecond)
			}
			stop() // it dies: no pass of it claims anything more
			if s, _ := state.ReadPool(ctx, ps.clean.(state.PoolStore), "one"); s == nil || s.Held != 1 {
				t.Fatalf("the claimed activity holds no slot: %+v", s)
			}
			second, _ := launchtest.Start(t, ps.clean, "name: second\nactivities:\n  next: {pool: one, command: ['true']}\n")
			runLaunchers(t, ps, 1)
			runMonitor(t, ps.st)
			if wf := launchtest.WaitSettled(t, ps.clean, second, 2*time.Minute); wf.State != state.WorkflowCompleted {
				t.Fatalf("second: %s %s", wf.State, wf.Reason)
			}
			hold := launchtest.Activity(t, ps.clean, first, "hold")
			next := launchtest.Activity(t, ps.clean, second, "next")
			if hold.State != state.Failed || next.StartTime.Before(hold.EndTime) {
				t.Errorf("first %s (ended %s), second started %s: want the first failed by its queued timeout before the second started", hold.State, hold.EndTime, next.StartTime)
			}
			if s, _ := state.ReadPool(ctx, ps.clean.(state.PoolStore), "one"); s == nil || s.Held != 0 {
				t.Errorf("pool after both: %+v", s)
			}
		})
	}
}

// TestPoolUndefinedThenSetAndGrown: activities of a pool that is not
// defined wait, READY; once it is set to 1 they run one at a time, and
// once it is grown to 3 the rest run together.
func TestPoolUndefinedThenSetAndGrown(t *testing.T) {
	t.Parallel()
	ps := poolStores(t)["sqlite"](t)
	ctx := launchtest.Context(t)
	log := filepath.Join(t.TempDir(), "runs.log")
	id, _ := launchtest.Start(t, ps.st, "name: late\ndefaults: {pool: late}\nactivities:\n"+
		"  a: {command: "+logCommand(log, "1")+"}\n  b: {command: "+logCommand(log, "1")+"}\n  c: {command: "+logCommand(log, "1")+"}\n  d: {command: "+logCommand(log, "1")+"}\n")
	runLaunchers(t, ps, 2)
	time.Sleep(2 * time.Second) // passes of both launchers
	for _, n := range []string{"a", "b", "c", "d"} {
		if a := launchtest.Activity(t, ps.st, id, n); a.State != state.Ready {
			t.Fatalf("%s is %s while its pool is not defined", n, a.State)
		}
	}
	if _, err := state.SetPool(ctx, ps.st.(state.PoolStore), "late", 1, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(log); err == nil && len(readSpans(t, log)) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the activities did not start once the pool was set")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := state.SetPool(ctx, ps.st.(state.PoolStore), "late", 3, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if wf := launchtest.WaitSettled(t, ps.st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("%s %s", wf.State, wf.Reason)
	}
	spans := readSpans(t, log)
	var first, rest = map[string]*span{}, map[string]*span{}
	var ids []string
	for id := range spans {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return spans[ids[i]].start < spans[ids[j]].start })
	for i, id := range ids {
		if i < 2 {
			first[id] = spans[id]
		} else {
			rest[id] = spans[id]
		}
	}
	if n := mostAtOnce(first, func(string) int { return 1 }); n != 1 {
		t.Errorf("%d ran at once in a pool of 1", n)
	}
	if n := mostAtOnce(spans, func(string) int { return 1 }); n < 2 || n > 3 {
		t.Errorf("at most %d ran at once after the pool grew to 3, want 2 or 3", n)
	}
}
