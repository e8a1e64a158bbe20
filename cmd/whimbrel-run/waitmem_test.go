//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// binaryResident is how much of its own binary process pid holds
// resident (its mappings of the binary that are not writable), in kB.
func binaryResident(pid int) (int, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, err
	}
	kb, ours := 0, false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			ours = len(f) >= 6 && strings.Join(f[5:], " ") == exe && len(f[1]) == 4 && f[1][1] != 'w'
		}
		if len(f) == 3 && f[0] == "Rss:" && ours {
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb, nil
}

// TestWaitingWrapperGivesItsBinaryPagesBackAfterEachBeat: a wrapper
// whose command runs on past its first second holds, most of the time
// between its heartbeats, under a quarter of its binary resident (each
// beat brings back the pages its path through the store's client and the
// collector touch, and the wrapper unmaps them again once the beat has
// landed), on DynamoDB behind the fault proxy and on the embedded store;
// it beats all along (the lease holds, the command completes). A wrapper
// that unmapped its pages only once would hold what its first beats
// brought back for the rest of its wait.
func TestWaitingWrapperGivesItsBinaryPagesBackAfterEachBeat(t *testing.T) {
	info, err := os.Stat(binary)
	if err != nil {
		t.Fatal(err)
	}
	size := int(info.Size() / 1024)
	const interval = 500 * time.Millisecond
	check := func(t *testing.T, env []string, get func() (*state.ActivityExec, error)) {
		t.Helper()
		w := start(t, env, "--heartbeat-interval", interval.String(), "--heartbeat-timeout", "10s", "--", "sleep", "6")
		began := time.Now()
		time.Sleep(2500 * time.Millisecond)
		var kbs []int
		for time.Since(began) < 5500*time.Millisecond {
			kb, err := binaryResident(w.cmd.Process.Pid)
			if err != nil {
				t.Fatalf("reading the wrapper's pages: %v\nstderr:\n%s", err, w.stderr.String())
			}
			kbs = append(kbs, kb)
			time.Sleep(20 * time.Millisecond)
		}
		if code := w.wait(t, time.Minute); code != 0 {
			t.Fatalf("whimbrel-run exited %d; want 0\nstderr:\n%s", code, w.stderr.String())
		}
		a, err := get()
		if err != nil || a.State != state.Completed {
			t.Fatalf("activity %+v, %v; want COMPLETED", a, err)
		}
		slices.Sort(kbs)
		low := kbs[len(kbs)/4]
		t.Logf("the binary's resident pages between 2.5 s and 5.5 s, of %d kB: lowest %d kB, lower quartile %d kB, highest %d kB (%d readings)",
			size, kbs[0], low, kbs[len(kbs)-1], len(kbs))
		if low*4 > size {
			t.Errorf("the waiting wrapper held %d kB of its %d kB binary in a quarter of the readings at least; want under a quarter of it", low, size)
		}
	}

	t.Run("dynamodb behind the fault proxy", func(t *testing.T) {
		f := newFixture(t, storetest.DAG{"a": nil})
		f.queue(t, "a")
		proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.05})
		env := f.env(t, "a")
		for i, v := range env {
			if strings.HasPrefix(v, "AWS_ENDPOINT_URL_DYNAMODB=") {
				env[i] = "AWS_ENDPOINT_URL_DYNAMODB=" + proxy.Endpoint
			}
		}
		check(t, env, func() (*state.ActivityExec, error) { return f.st.GetActivity(testbin.Context(t), f.key("a")) })
		t.Logf("the proxy: %s", proxy.Stats())
	})

	t.Run("sqlite", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "state.db")
		st, err := sqlite.Open(db, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := st.Install(ctx, false); err != nil {
			t.Fatal(err)
		}
		w := storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil})
		storetest.Create(t, st, w)
		k := storetest.Key(w, "a")
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
			t.Fatal(err)
		}
		env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "WHIMBREL_STORE=sqlite:" + db,
			"WHIMBREL_ACTIVITY_EXEC_ID=" + k.ActivityExecID, "WHIMBREL_WORKFLOW_EXEC_ID=" + k.WorkflowExecID,
			"WHIMBREL_ACTIVITY_NAME=a", "WHIMBREL_WORKFLOW_NAME=wf"}
		check(t, env, func() (*state.ActivityExec, error) { return st.GetActivity(ctx, k) })
	})
}
