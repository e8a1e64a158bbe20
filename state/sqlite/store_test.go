package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func newStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) state.Store { return newStore(t) },
		PutForeignActivity: func(t *testing.T, s state.Store, attrs map[string]any) {
			t.Helper()
			// A foreign client writes the row directly.
			st := s.(*sqlite.Store)
			it := attr.Item{}
			for k, v := range attrs {
				it[k] = toValue(t, v)
			}
			raw, err := json.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", "file:"+st.Path()+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// The columns hold what the store would derive from the item.
			var stateCol, epochCol any
			if s, ok := attrs["state"].(string); ok {
				stateCol = s
			}
			switch n := attrs["state_time_epoch"].(type) {
			case int, float64:
				epochCol = n
			}
			if _, err := db.Exec(fmt.Sprintf(`INSERT INTO "%sactivity_exec" (activity_exec_id, workflow_exec_id, state, state_time_epoch, item) VALUES (?, ?, ?, ?, ?)`, st.Prefix()),
				attrs["activity_exec_id"], attrs["workflow_exec_id"], stateCol, epochCol, string(raw)); err != nil {
				t.Fatalf("put foreign item: %v", err)
			}
		},
	})
}

func toValue(t *testing.T, v any) attr.Value {
	switch v := v.(type) {
	case string:
		return attr.S(v)
	case int:
		return attr.Int(v)
	case float64:
		return attr.N(strconv.FormatFloat(v, 'g', -1, 64))
	case bool:
		return attr.Bool(v)
	case []string:
		return attr.SS(v)
	case []any:
		l := attr.L{}
		for _, e := range v {
			l = append(l, toValue(t, e))
		}
		return l
	}
	t.Fatalf("toValue: unsupported %T", v)
	return nil
}

func TestInstallIsANoOpTheSecondTime(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{Prefix: "p_"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	plan, err := st.Install(ctx, true)
	if err != nil || len(plan) != 20 { // 10 tables: create and record each
		t.Fatalf("dry run: %v %v", plan, err)
	}
	if did, err := st.Install(ctx, false); err != nil || len(did) != 20 {
		t.Fatalf("install: %v %v", did, err)
	}
	if again, err := st.Install(ctx, false); err != nil || len(again) != 0 {
		t.Errorf("second install: %v %v, want nothing", again, err)
	}
}

// claimer is the helper process of TestClaimRaceAcrossProcesses: it claims
// one activity and prints what happened.
func claimer() {
	st, err := sqlite.Open(os.Getenv("CLAIM_DB"), sqlite.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	k := state.ActivityKey{ActivityExecID: os.Getenv("CLAIM_ACTIVITY"), WorkflowExecID: os.Getenv("CLAIM_WORKFLOW")}
	fmt.Println("ready")
	_, _ = io.ReadAll(os.Stdin) // the barrier: stdin closes for all at once
	owner := "owner-" + strconv.Itoa(os.Getpid())
	_, err = st.UpdateActivity(context.Background(), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: storetest.Claim(owner)})
	var ce *state.ConflictError
	switch {
	case err == nil:
		fmt.Println("won", owner)
	case errors.As(err, &ce):
		fmt.Println("lost", ce.State, ce.Owner)
	default:
		fmt.Println("error:", err)
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("CLAIM_DB") != "" {
		claimer()
		return
	}
	os.Exit(m.Run())
}

// TestClaimRaceAcrossProcesses: 16 processes claim one activity at the same
// moment; exactly one wins, every other learns the winner.
func TestClaimRaceAcrossProcesses(t *testing.T) {
	st := newStore(t)
	w := storetest.NewWorkflow(t, "race", storetest.DAG{"only": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "only")
	if _, err := st.UpdateActivity(context.Background(), k, state.ActivityChange{
		From: []state.ActivityState{state.Requested}, To: state.Queued}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	outs := make(chan string, n)
	var gates []io.WriteCloser
	for i := 0; i < n; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CLAIM_DB="+st.Path(), "CLAIM_ACTIVITY="+k.ActivityExecID,
			"CLAIM_WORKFLOW="+k.WorkflowExecID)
		gate, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		gates = append(gates, gate)
		r := bufio.NewReader(stdout)
		if line, err := r.ReadString('\n'); err != nil || line != "ready\n" { // opened its store
			t.Fatalf("claimer %d: %q %v", i, line, err)
		}
		go func() {
			rest, _ := io.ReadAll(r)
			if err := cmd.Wait(); err != nil {
				outs <- "error: " + err.Error()
				return
			}
			outs <- strings.TrimSpace(string(rest))
		}()
	}
	for _, g := range gates { // all at once
		g.Close()
	}
	var winners, losers []string
	for i := 0; i < n; i++ {
		select {
		case o := <-outs:
			switch {
			case strings.HasPrefix(o, "won "):
				winners = append(winners, strings.TrimPrefix(o, "won "))
			case strings.HasPrefix(o, "lost "):
				losers = append(losers, o)
			default:
				t.Errorf("claimer: %s", o)
			}
		case <-time.After(time.Minute):
			t.Fatal("claimers did not finish")
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d winners: %v", len(winners), winners)
	}
	for _, l := range losers {
		if l != "lost RUNNING "+winners[0] {
			t.Errorf("a loser says %q, want it to name RUNNING and %s", l, winners[0])
		}
	}
	a, err := st.GetActivity(context.Background(), k)
	if err != nil || a.Owner != winners[0] || a.Attempt != 1 {
		t.Errorf("item: %+v %v", a, err)
	}
}

// TestInstallPurgesExpired: SQLite has no TTL; install deletes what expired.
func TestInstallPurgesExpired(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	old := storetest.NewWorkflow(t, "old", storetest.DAG{"a": nil, "b": {"a"}})
	kept := storetest.NewWorkflow(t, "kept", storetest.DAG{"a": nil})
	storetest.Create(t, st, old)
	storetest.Create(t, st, kept)
	if err := st.Expire(ctx, old.Exec.WorkflowExecID, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.Expire(ctx, kept.Exec.WorkflowExecID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	did, err := st.Install(ctx, false)
	if err != nil || len(did) != 1 || !strings.Contains(did[0].Action, "delete 5 expired items") { // workflow, request, 2 activities, 1 dependency
		t.Fatalf("install: %v %v", did, err)
	}
	if _, err := st.GetWorkflow(ctx, old.Exec.WorkflowExecID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the expired workflow is still there: %v", err)
	}
	if _, err := st.GetWorkflow(ctx, kept.Exec.WorkflowExecID); err != nil {
		t.Errorf("the workflow not yet expired is gone: %v", err)
	}
}

// A store whose tables were never installed says so in Whimbrel's words,
// naming what to run: the daemons do not install the embedded store (the
// operator CLI does, on every command).
func TestMissingTableSaysWhatToRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	_, err = st.GetWorkflow(context.Background(), state.NewWorkflowExecID("w"))
	var tm *state.TableMissingError
	if !errors.As(err, &tm) || !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("got %v, want a *state.TableMissingError", err)
	}
	want := "table whimbrel_workflow_exec does not exist: run `whimbrel install` (prefix \"whimbrel_\", store sqlite:" + path + ")"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to say %q", err, want)
	}
}

// A row another client wrote that is not JSON never stops the purge of
// expired items (which every operator command runs on the embedded
// store): the row stays, for the reads to report.
func TestPurgeSkipsRowsThatAreNotJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO "whimbrel_activity_exec" (activity_exec_id, workflow_exec_id, item) VALUES ('junk::1', 'w::1', 'not json')`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install (which purges) with a row that is not JSON: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM "whimbrel_activity_exec"`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows left: %d (%v), want the one that is not JSON kept", n, err)
	}
}
