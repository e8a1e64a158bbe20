package wrapper_test

import (
	"context"
	"math"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/wrapper"
)

// gcPercent reads the collector's setting without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestGCDeferredUntilTheCommandHasRun, on the embedded store: DeferGC
// holds the collector back (under a memory limit) while a short command
// runs and is recorded; a command that runs past a second has it back,
// at 25 while it waits and as usual once it has ended, with no limit;
// GOGC set by the user is left alone. Not parallel:
// the collector's setting is the process's.
func TestGCDeferredUntilTheCommandHasRun(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100); debug.SetMemoryLimit(math.MaxInt64) })
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	w := storetest.NewWorkflow(t, "wf", storetest.DAG{"short": nil, "long": nil})
	storetest.Create(t, st, w)
	run := func(name string, cmd ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := st.UpdateActivity(ctx, storetest.Key(w, name), state.ActivityChange{
			From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
			t.Fatal(err)
		}
		code := wrapper.Run(ctx, wrapper.Direct(st), wrapper.Config{Key: storetest.Key(w, name), Command: cmd,
			Heartbeat: true, HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second, RecordTimeout: 10 * time.Second})
		if a, _ := st.GetActivity(ctx, storetest.Key(w, name)); code != 0 || a == nil || a.State != state.Completed {
			t.Fatalf("%s: exit %d, activity %+v; want 0 and COMPLETED", name, code, a)
		}
	}

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	wrapper.DeferGC()
	if p, lim := gcPercent(), debug.SetMemoryLimit(-1); p != -1 || lim == math.MaxInt64 {
		t.Fatalf("after DeferGC: GC percent %d, memory limit %d; want -1 under a limit", p, lim)
	}
	run("short", "true")
	if p := gcPercent(); p != -1 {
		t.Errorf("after a short command the GC percent is %d; want it still held back (-1)", p)
	}
	// While the long command waits past a second, the collector runs at
	// 25 (read through runtime/metrics, which changes nothing).
	stop, seen := make(chan struct{}), make(chan map[uint64]bool, 1)
	go func() {
		got := map[uint64]bool{}
		sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		for {
			select {
			case <-stop:
				seen <- got
				return
			case <-time.After(20 * time.Millisecond):
				metrics.Read(sample)
				got[sample[0].Value.Uint64()] = true
			}
		}
	}()
	run("long", "sleep", "2.5")
	close(stop)
	if got := <-seen; !got[25] {
		t.Errorf("while a command ran 2.5 s the GC percent was never 25 (seen: %v)", got)
	}
	if p, lim := gcPercent(), debug.SetMemoryLimit(-1); p != 100 || lim != math.MaxInt64 {
		t.Errorf("after a command that ran 2.5 s: GC percent %d, memory limit %d; want 100 and none", p, lim)
	}

	t.Setenv("GOGC", "200")
	wrapper.DeferGC()
	if p := gcPercent(); p != 100 {
		t.Errorf("with GOGC set, DeferGC changed the GC percent to %d", p)
	}
}
