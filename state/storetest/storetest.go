// Package storetest is the conformance suite every state.Store passes. A
// backend's tests call Run with a Harness; the suite then checks the
// contract's guarantees against the real backend: one winner per claim, one
// count per dependency edge, fencing by owner, clear errors on missing and
// malformed items.
package storetest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// Harness is what a backend gives the suite.
type Harness struct {
	// New returns an empty store with its schema installed, of this test
	// alone.
	New func(t *testing.T) state.Store
	// PutForeignActivity writes an activity_exec item as a foreign client
	// might, bypassing the Store's encoding. Values are string (String),
	// int or float64 (Number), bool (Boolean), []any (List) and []string
	// (String Set).
	PutForeignActivity func(t *testing.T, st state.Store, attrs map[string]any)
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"CreateAndRead", testCreateAndRead},
		{"CreateIsIdempotent", testCreateIsIdempotent},
		{"CreateBeyondOneTransaction", testCreateBeyondOneTransaction},
		{"ClaimRace", testClaimRace},
		{"IllegalTransitionsWriteNothing", testIllegalTransitions},
		{"ReplayedDependencyCountsOnce", testReplayedDependency},
		{"ResolveTheLastEdgeAndReady", testResolveAndReady},
		{"ConcurrentFanIn", testConcurrentFanIn},
		{"StaleOwnerIsFenced", testStaleOwner},
		{"NotFound", testNotFound},
		{"ForeignItems", testForeignItems},
		{"StateIndex", testStateIndex},
		{"WorkflowMoves", testWorkflowMoves},
		{"Preconditions", testPreconditions},
		{"TimeoutLosesToANewHeartbeat", testHeartbeatSeen},
		{"ClaimWritesTheFirstHeartbeat", testClaimWritesTheFirstHeartbeat},
		{"LandedWriteOnMalformedItem", testLandedWriteOnMalformedItem},
		{"CreateRefusesBadInput", testCreateRefusesBadInput},
		{"Expire", testExpire},
		{"CreateActivity", testCreateActivity},
		{"Data", testData},
		{"AnyLive", testAnyLive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, h)
		})
	}
}

// DAG describes a workflow for tests: activity name → names it waits on.
type DAG map[string][]string

// NewWorkflow builds everything CreateWorkflow writes for a DAG.
func NewWorkflow(t testing.TB, name string, d DAG) *state.NewWorkflow {
	t.Helper()
	now := state.Truncate(time.Now())
	execID := state.NewWorkflowExecID(name)
	reqID := state.NewWorkflowRequestID(name)
	w := &state.NewWorkflow{
		Request: &state.WorkflowRequest{WorkflowRequestID: reqID, WorkflowName: name, When: now,
			Source: "storetest", Manual: true, WorkflowExecID: execID},
		Exec: state.WorkflowExec{WorkflowExecID: execID, WorkflowName: name, State: state.WorkflowRequested,
			WorkflowRequestID: reqID, StartTime: now, Source: "storetest", Definition: `{"name":"` + name + `"}`},
	}
	names := make([]string, 0, len(d))
	for a := range d {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		id := state.ActivityExecIDFor(execID, a)
		act := state.ActivityExec{
			ActivityKey:  state.ActivityKey{ActivityExecID: id, WorkflowExecID: execID},
			WorkflowName: name, ActivityName: a, State: state.Requested, StateTime: now,
		}
		for i, up := range d[a] {
			if _, ok := d[up]; !ok {
				t.Fatalf("dag: %s waits on unknown %s", a, up)
			}
			upID := state.ActivityExecIDFor(execID, up)
			act.PendingDependencies = append(act.PendingDependencies, upID)
			w.Dependencies = append(w.Dependencies, state.Dependency{
				ID: state.DependencyID(id, i), ActivityExecID: id, WorkflowExecID: execID, DependentActivityExecID: upID,
			})
		}
		sort.Strings(act.PendingDependencies)
		w.Activities = append(w.Activities, act)
	}
	return w
}

// Key is the key of the named activity of w.
func Key(w *state.NewWorkflow, activity string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(w.Exec.WorkflowExecID, activity), WorkflowExecID: w.Exec.WorkflowExecID}
}

// Create writes w and moves the workflow to RUNNING.
func Create(t testing.TB, st state.Store, w *state.NewWorkflow) {
	t.Helper()
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	if _, err := st.UpdateWorkflow(testbin.Context(t), w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning,
	}); err != nil {
		t.Fatalf("start workflow: %v", err)
	}
}

// move changes an activity's state without fencing, failing the test on error.
func move(t *testing.T, st state.Store, k state.ActivityKey, from, to state.ActivityState) *state.ActivityExec {
	t.Helper()
	a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{from}, To: to})
	if err != nil {
		t.Fatalf("move %s %s → %s: %v", k.ActivityExecID, from, to, err)
	}
	return a
}

func claim(owner string) *state.Claim {
	return &state.Claim{Owner: owner, Host: "host-" + owner, PID: 4242, HeartbeatEnabled: true,
		HeartbeatInterval: 15 * time.Second, HeartbeatTimeout: time.Minute}
}

func conflict(t *testing.T, err error) *state.ConflictError {
	t.Helper()
	var ce *state.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want a *state.ConflictError", err)
	}
	if !errors.Is(err, state.ErrConflict) {
		t.Errorf("errors.Is(%v, ErrConflict) = false", err)
	}
	return ce
}

func testCreateAndRead(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "etl", DAG{"extract": nil, "transform": {"extract"}, "load": {"transform", "extract"}})
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}

	got, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	if fmt.Sprint(*got) != fmt.Sprint(w.Exec) {
		t.Errorf("GetWorkflow:\n got %+v\nwant %+v", *got, w.Exec)
	}
	if !got.StartTime.Equal(w.Exec.StartTime) {
		t.Errorf("start time round trip: got %v, want %v", got.StartTime, w.Exec.StartTime)
	}

	req, err := st.GetRequest(testbin.Context(t), w.Request.WorkflowRequestID, w.Request.WorkflowName)
	if err != nil {
		t.Fatalf("GetRequest: %v", err)
	}
	if fmt.Sprint(*req) != fmt.Sprint(*w.Request) {
		t.Errorf("GetRequest:\n got %+v\nwant %+v", *req, *w.Request)
	}

	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatalf("Activities: %v", err)
	}
	if len(acts) != 3 {
		t.Fatalf("Activities: got %d, want 3", len(acts))
	}
	byName := map[string]*state.ActivityExec{}
	for _, a := range acts {
		byName[a.ActivityName] = a
	}
	for _, want := range w.Activities {
		a := byName[want.ActivityName]
		if a == nil {
			t.Fatalf("activity %s missing", want.ActivityName)
		}
		if a.State != state.Requested || a.ActivityExecID != want.ActivityExecID || !a.StateTime.Equal(want.StateTime) ||
			strings.Join(a.PendingDependencies, ",") != strings.Join(want.PendingDependencies, ",") ||
			!a.StartTime.IsZero() || !a.HeartbeatTime.IsZero() {
			t.Errorf("activity %s:\n got %+v\nwant %+v", want.ActivityName, *a, want)
		}
	}

	deps, err := st.Dependents(testbin.Context(t), Key(w, "extract").ActivityExecID)
	if err != nil {
		t.Fatalf("Dependents: %v", err)
	}
	var waiting []string
	for _, d := range deps {
		waiting = append(waiting, d.ActivityExecID)
	}
	sort.Strings(waiting)
	want := []string{Key(w, "load").ActivityExecID, Key(w, "transform").ActivityExecID}
	sort.Strings(want)
	if strings.Join(waiting, ",") != strings.Join(want, ",") {
		t.Errorf("Dependents(extract) = %v, want %v", waiting, want)
	}
}

func testCreateIsIdempotent(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "idem", DAG{"a": nil, "b": {"a"}})
	for i := 0; i < 2; i++ {
		if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
			t.Fatalf("CreateWorkflow #%d while REQUESTED: %v", i+1, err)
		}
	}

	// The same request for another execution answers with the first one.
	other := NewWorkflow(t, "idem", DAG{"a": nil})
	other.Request.WorkflowRequestID = w.Request.WorkflowRequestID
	err := st.CreateWorkflow(testbin.Context(t), other)
	var ee *state.ExistsError
	if !errors.As(err, &ee) || !errors.Is(err, state.ErrExists) {
		t.Fatalf("same request, other execution: got %v, want an *ExistsError", err)
	}
	if ee.WorkflowExecID != w.Exec.WorkflowExecID {
		t.Errorf("ExistsError names %s, want %s", ee.WorkflowExecID, w.Exec.WorkflowExecID)
	}
	if _, err := st.GetWorkflow(testbin.Context(t), other.Exec.WorkflowExecID); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("the refused execution was written: GetWorkflow = %v", err)
	}

	// Once running, writing it again is refused and changes nothing.
	if _, err := st.UpdateWorkflow(testbin.Context(t), w.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowRunning,
	}); err != nil {
		t.Fatal(err)
	}
	move(t, st, Key(w, "a"), state.Requested, state.Queued)
	if err := st.CreateWorkflow(testbin.Context(t), w); !errors.Is(err, state.ErrExists) {
		t.Fatalf("CreateWorkflow after RUNNING: got %v, want ErrExists", err)
	}
	a, err := st.GetActivity(testbin.Context(t), Key(w, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if a.State != state.Queued {
		t.Errorf("activity a is %s after a refused re-create, want QUEUED", a.State)
	}
}

func testCreateBeyondOneTransaction(t *testing.T, h Harness) {
	st := h.New(t)
	// 150 activities in a chain: 150 + 149 items, more than one transaction.
	d := DAG{}
	for i := 0; i < 150; i++ {
		name := fmt.Sprintf("step-%03d", i)
		if i == 0 {
			d[name] = nil
		} else {
			d[name] = []string{fmt.Sprintf("step-%03d", i-1)}
		}
	}
	w := NewWorkflow(t, "long", d)
	// A first attempt that wrote only a consistent part (as a creator that
	// crashed after one transaction would)...
	partial := *w
	partial.Activities = w.Activities[:60]
	partial.Dependencies = w.Dependencies[:59]
	if err := st.CreateWorkflow(testbin.Context(t), &partial); err != nil {
		t.Fatalf("partial CreateWorkflow: %v", err)
	}
	// ...is completed by the retry.
	if err := st.CreateWorkflow(testbin.Context(t), w); err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 150 {
		t.Errorf("Activities: got %d, want 150", len(acts))
	}
	for i := 0; i < 149; i++ {
		deps, err := st.Dependents(testbin.Context(t), Key(w, fmt.Sprintf("step-%03d", i)).ActivityExecID)
		if err != nil {
			t.Fatal(err)
		}
		if next := Key(w, fmt.Sprintf("step-%03d", i+1)).ActivityExecID; len(deps) != 1 || deps[0].ActivityExecID != next {
			t.Errorf("Dependents(step-%03d) = %+v, want step-%03d", i, deps, i+1)
		}
	}
}

func testClaimRace(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "race", DAG{"only": nil})
	Create(t, st, w)
	k := Key(w, "only")
	move(t, st, k, state.Requested, state.Queued)

	const racers = 32
	var wg sync.WaitGroup
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
				From:  []state.ActivityState{state.Queued, state.Ready, state.Preparing},
				To:    state.Running,
				Claim: claim(fmt.Sprintf("owner-%02d", i)),
			})
		}(i)
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Fatalf("owners %d and %d both claimed the activity", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("nobody claimed the activity: %v", errs[0])
	}
	wantOwner := fmt.Sprintf("owner-%02d", winner)
	for i, err := range errs {
		if i == winner {
			continue
		}
		ce := conflict(t, err)
		if ce.State != string(state.Running) || ce.Owner != wantOwner || ce.Attempt != 1 {
			t.Errorf("loser %d sees state %s owner %s attempt %d, want RUNNING %s 1", i, ce.State, ce.Owner, ce.Attempt, wantOwner)
		}
	}
	a, err := st.GetActivity(testbin.Context(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if a.Owner != wantOwner || a.Attempt != 1 || a.State != state.Running || a.StartTime.IsZero() ||
		a.Host != "host-"+wantOwner || a.PID != 4242 || !a.HeartbeatEnabled ||
		a.HeartbeatInterval != 15*time.Second || a.HeartbeatTimeout != time.Minute {
		t.Errorf("claimed item: %+v", *a)
	}
	if !a.HeartbeatTime.Equal(a.StartTime) {
		t.Errorf("the claim wrote heartbeat %v, want the claim time %v", a.HeartbeatTime, a.StartTime)
	}
}

func testIllegalTransitions(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "illegal", DAG{"a": nil})
	Create(t, st, w)
	k := Key(w, "a")
	tests := []struct {
		from, to state.ActivityState
	}{
		{state.Requested, state.Running},
		{state.Requested, state.Completed},
		{state.Requested, state.TimedOut},
		{state.Completed, state.Running},
	}
	for _, tc := range tests {
		_, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{tc.from}, To: tc.to})
		var te *state.TransitionError
		if !errors.As(err, &te) {
			t.Errorf("%s → %s: got %v, want a *TransitionError", tc.from, tc.to, err)
			continue
		}
		if !strings.Contains(err.Error(), string(tc.from)) || !strings.Contains(err.Error(), string(tc.to)) {
			t.Errorf("%s → %s: error %q does not name both states", tc.from, tc.to, err)
		}
	}
	a, err := st.GetActivity(testbin.Context(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != state.Requested {
		t.Errorf("state after refused moves: %s, want REQUESTED", a.State)
	}
	// A legal move from a state the item is not in is a conflict.
	_, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued})
	if ce := conflict(t, err); ce.State != string(state.Requested) {
		t.Errorf("conflict names state %s, want REQUESTED", ce.State)
	}
}

func testReplayedDependency(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "replay", DAG{"a": nil, "b": nil, "c": {"a", "b"}})
	Create(t, st, w)
	c, a := Key(w, "c"), Key(w, "a")

	got, resolved, err := st.ResolveDependency(testbin.Context(t), c, a.ActivityExecID)
	if err != nil || !resolved {
		t.Fatalf("first ResolveDependency: resolved=%v err=%v", resolved, err)
	}
	if want := []string{Key(w, "b").ActivityExecID}; strings.Join(got.PendingDependencies, ",") != want[0] {
		t.Errorf("pending after first: %v, want %v", got.PendingDependencies, want)
	}
	for i := 0; i < 3; i++ {
		got, resolved, err = st.ResolveDependency(testbin.Context(t), c, a.ActivityExecID)
		if err != nil || resolved {
			t.Fatalf("replay %d: resolved=%v err=%v, want false, nil", i, resolved, err)
		}
		if len(got.PendingDependencies) != 1 {
			t.Errorf("replay %d: pending %v, want one left", i, got.PendingDependencies)
		}
	}
	got, resolved, err = st.ResolveDependency(testbin.Context(t), c, Key(w, "b").ActivityExecID)
	if err != nil || !resolved || len(got.PendingDependencies) != 0 {
		t.Fatalf("last edge: resolved=%v pending=%v err=%v", resolved, got.PendingDependencies, err)
	}
	// Replaying the last edge keeps it empty.
	got, resolved, err = st.ResolveDependency(testbin.Context(t), c, Key(w, "b").ActivityExecID)
	if err != nil || resolved || len(got.PendingDependencies) != 0 {
		t.Fatalf("replay of last edge: resolved=%v pending=%v err=%v", resolved, got.PendingDependencies, err)
	}
}

// testResolveAndReady: a move to READY that resolves the last edge in the
// same write happens only while that edge is the one pending, removes it
// exactly once, and a replay is refused and changes nothing.
func testResolveAndReady(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "resolve", DAG{"a": nil, "b": nil, "c": {"a", "b"}, "d": {"a"}})
	Create(t, st, w)
	a, b := Key(w, "a").ActivityExecID, Key(w, "b").ActivityExecID
	ready := func(k state.ActivityKey, up string) (*state.ActivityExec, error) {
		return st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Ready, Resolve: up})
	}
	// c waits on a and b: resolving a alone must not ready it.
	if _, err := ready(Key(w, "c"), a); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("ready c resolving a while b is pending: got %v, want a conflict", err)
	}
	if got, _ := st.GetActivity(testbin.Context(t), Key(w, "c")); got == nil || len(got.PendingDependencies) != 2 || got.State != state.Requested {
		t.Fatalf("c after the refused write: %+v, want REQUESTED with both edges", got)
	}
	// d waits on a alone.
	got, err := ready(Key(w, "d"), a)
	if err != nil || got.State != state.Ready || len(got.PendingDependencies) != 0 {
		t.Fatalf("ready d resolving a: %+v, %v; want READY with nothing pending", got, err)
	}
	if _, err := ready(Key(w, "d"), a); !errors.Is(err, state.ErrConflict) {
		t.Errorf("replay: got %v, want a conflict", err)
	}
	if _, resolved, err := st.ResolveDependency(testbin.Context(t), Key(w, "d"), a); err != nil || resolved {
		t.Errorf("ResolveDependency after the combined write: resolved=%v err=%v, want false, nil", resolved, err)
	}
	// The last of c's two edges.
	if _, resolved, err := st.ResolveDependency(testbin.Context(t), Key(w, "c"), a); err != nil || !resolved {
		t.Fatalf("resolve c's edge on a: resolved=%v err=%v", resolved, err)
	}
	if got, err := ready(Key(w, "c"), b); err != nil || got.State != state.Ready || len(got.PendingDependencies) != 0 {
		t.Fatalf("ready c resolving b: %+v, %v", got, err)
	}
	// Only REQUESTED → READY may resolve.
	if _, err := st.UpdateActivity(testbin.Context(t), Key(w, "a"), state.ActivityChange{From: []state.ActivityState{state.Requested}, To: state.Queued, Resolve: b}); err == nil {
		t.Error("a move to QUEUED resolving an edge was accepted")
	}
}

func testConcurrentFanIn(t *testing.T, h Harness) {
	st := h.New(t)
	d := DAG{"join": nil}
	var ups []string
	for i := 0; i < 16; i++ {
		up := fmt.Sprintf("up-%02d", i)
		d[up] = nil
		ups = append(ups, up)
	}
	d["join"] = ups
	w := NewWorkflow(t, "fanin", d)
	Create(t, st, w)
	join := Key(w, "join")

	// Every upstream edge is resolved twice, concurrently; each counts once,
	// and exactly one resolver sees the set become empty.
	var wg sync.WaitGroup
	var mu sync.Mutex
	counted, sawEmpty := 0, 0
	for _, up := range ups {
		for rep := 0; rep < 2; rep++ {
			wg.Add(1)
			go func(upID string) {
				defer wg.Done()
				a, resolved, err := st.ResolveDependency(testbin.Context(t), join, upID)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if resolved {
					counted++
					if len(a.PendingDependencies) == 0 {
						sawEmpty++
					}
				}
			}(Key(w, up).ActivityExecID)
		}
	}
	wg.Wait()
	if counted != len(ups) || sawEmpty != 1 {
		t.Errorf("counted %d edges (want %d), %d resolvers saw it empty (want 1)", counted, len(ups), sawEmpty)
	}
}

func testStaleOwner(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "fence", DAG{"a": nil, "b": nil})
	Create(t, st, w)
	k := Key(w, "a")
	move(t, st, k, state.Requested, state.Queued)
	if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("current"),
	}); err != nil {
		t.Fatal(err)
	}

	beat := state.Truncate(time.Now())
	if err := st.Heartbeat(testbin.Context(t), k, "current", beat); err != nil {
		t.Fatalf("Heartbeat by the owner: %v", err)
	}
	a, err := st.GetActivity(testbin.Context(t), k)
	if err != nil {
		t.Fatal(err)
	}
	if !a.HeartbeatTime.Equal(beat) {
		t.Errorf("heartbeat time %v, want %v", a.HeartbeatTime, beat)
	}

	// Another owner can neither heartbeat nor finish.
	ce := conflict(t, st.Heartbeat(testbin.Context(t), k, "stale", time.Now()))
	if ce.Owner != "current" || ce.State != string(state.Running) {
		t.Errorf("stale heartbeat conflict: %+v", ce)
	}
	_, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "stale", Exit: &state.Exit{Code: 0},
	})
	if ce := conflict(t, err); ce.Owner != "current" {
		t.Errorf("stale finish conflict names owner %q, want current", ce.Owner)
	}

	// After the monitor times it out, even the owner cannot heartbeat or
	// change the state, but may record how the command ended.
	if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.TimedOut, Reason: "no heartbeat",
	}); err != nil {
		t.Fatal(err)
	}
	ce = conflict(t, st.Heartbeat(testbin.Context(t), k, "current", time.Now()))
	if ce.State != string(state.TimedOut) {
		t.Errorf("heartbeat after timeout sees %s, want TIMED_OUT", ce.State)
	}
	_, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "current",
	})
	conflict(t, err)
	code := 0
	a, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.TimedOut, state.CancelledRunning}, Owner: "current",
		Exit: &state.Exit{Code: code}, Error: "tail",
	})
	if err != nil {
		t.Fatalf("record exit on TIMED_OUT: %v", err)
	}
	if a.State != state.TimedOut || a.ExitCode == nil || *a.ExitCode != 0 || a.Error != "tail" || a.EndTime.IsZero() {
		t.Errorf("after recording the exit: %+v", *a)
	}

	// A finish by the owner of a running activity records everything.
	kb := Key(w, "b")
	move(t, st, kb, state.Requested, state.Queued)
	if _, err := st.UpdateActivity(testbin.Context(t), kb, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("b-owner"),
	}); err != nil {
		t.Fatal(err)
	}
	b, err := st.UpdateActivity(testbin.Context(t), kb, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "b-owner",
		Exit: &state.Exit{Code: 137, Signal: "SIGKILL"}, Error: "oom", Reason: "exit status 137",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.State != state.Failed || *b.ExitCode != 137 || b.Signal != "SIGKILL" || b.Reason != "exit status 137" || b.EndTime.IsZero() {
		t.Errorf("after finishing: %+v", *b)
	}
}

func testNotFound(t *testing.T, h Harness) {
	st := h.New(t)
	missing := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor("x::1", "ghost"), WorkflowExecID: state.NewWorkflowExecID("x")}
	checks := map[string]error{}
	_, checks["GetActivity"] = st.GetActivity(testbin.Context(t), missing)
	_, checks["UpdateActivity"] = st.UpdateActivity(testbin.Context(t), missing, state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Queued})
	checks["Heartbeat"] = st.Heartbeat(testbin.Context(t), missing, "o", time.Now())
	_, _, checks["ResolveDependency"] = st.ResolveDependency(testbin.Context(t), missing, "up")
	_, checks["GetWorkflow"] = st.GetWorkflow(testbin.Context(t), missing.WorkflowExecID)
	_, checks["UpdateWorkflow"] = st.UpdateWorkflow(testbin.Context(t), missing.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed})
	_, checks["GetRequest"] = st.GetRequest(testbin.Context(t), "x::nope", "x")
	for op, err := range checks {
		if !errors.Is(err, state.ErrNotFound) {
			t.Errorf("%s on a missing item: got %v, want ErrNotFound", op, err)
		}
	}
	acts, err := st.Activities(testbin.Context(t), missing.WorkflowExecID)
	if err != nil || len(acts) != 0 {
		t.Errorf("Activities of a missing workflow: %v, %v; want none", acts, err)
	}
	if _, err := st.GetWorkflow(testbin.Context(t), "not-an-id"); err == nil || errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetWorkflow(not-an-id): got %v, want an error about the ID", err)
	}
}

func testForeignItems(t *testing.T, h Harness) {
	if h.PutForeignActivity == nil {
		t.Fatal("the harness must provide PutForeignActivity")
	}
	st := h.New(t)
	wf := state.NewWorkflowExecID("foreign")
	base := func(name string) map[string]any {
		return map[string]any{
			"activity_exec_id": state.ActivityExecIDFor(wf, name),
			"workflow_exec_id": wf,
			"state":            "RUNNING",
		}
	}
	tests := []struct {
		name     string
		edit     func(map[string]any)
		wantAttr string // "" means the item must decode
	}{
		{"minimal", func(map[string]any) {}, ""},
		{"seed list times only", func(m map[string]any) {
			m["start_time"] = []any{2026, 11, 21, 8, 30, 15.25}
		}, ""},
		{"missing state", func(m map[string]any) { delete(m, "state") }, "state"},
		{"activity name is a number", func(m map[string]any) { m["activity_name"] = 3 }, "activity_name"},
		{"unknown state", func(m map[string]any) { m["state"] = "SLEEPING" }, "state"},
		{"attempt is a string", func(m map[string]any) { m["attempt"] = "one" }, "attempt"},
		{"attempt is fractional", func(m map[string]any) { m["attempt"] = 1.5 }, "attempt"},
		{"heartbeat epoch is a string", func(m map[string]any) { m["heartbeat_time_epoch"] = "yesterday" }, "heartbeat_time_epoch"},
		{"start time list too short", func(m map[string]any) { m["start_time"] = []any{2026, 11} }, "start_time"},
		{"start time month 13", func(m map[string]any) { m["start_time"] = []any{2026, 13, 1, 0, 0, 0} }, "start_time"},
		{"start time element is a string", func(m map[string]any) { m["start_time"] = []any{2026, "11", 1, 0, 0, 0} }, "start_time"},
		{"pending dependencies not a set", func(m map[string]any) { m["pending_dependencies"] = "a" }, "pending_dependencies"},
		{"heartbeat enabled is a string", func(m map[string]any) { m["heartbeat_enabled"] = "yes" }, "heartbeat_enabled"},
		{"huge heartbeat timeout", func(m map[string]any) { m["heartbeat_timeout"] = 1e12 }, "heartbeat_timeout"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base(fmt.Sprintf("act-%d", i))
			tc.edit(m)
			h.PutForeignActivity(t, st, m)
			k := state.ActivityKey{ActivityExecID: m["activity_exec_id"].(string), WorkflowExecID: wf}
			a, err := st.GetActivity(testbin.Context(t), k)
			if tc.wantAttr == "" {
				if err != nil {
					t.Fatalf("GetActivity: %v", err)
				}
				if a.ActivityName != fmt.Sprintf("act-%d", i) {
					t.Errorf("activity name %q, want it read from the ID", a.ActivityName)
				}
				if _, ok := m["start_time"]; ok && a.StartTime.IsZero() {
					t.Errorf("start time from the contract's list was not read")
				}
				return
			}
			var ie *state.DecodeError
			if !errors.As(err, &ie) || !errors.Is(err, state.ErrInvalidItem) {
				t.Fatalf("GetActivity: got %v, want a *DecodeError", err)
			}
			if ie.Attr != tc.wantAttr || !strings.Contains(err.Error(), tc.wantAttr) || !strings.Contains(err.Error(), k.ActivityExecID) {
				t.Errorf("error %q should name attribute %s and the item", err, tc.wantAttr)
			}
			// A conditional write on such an item reports it too, never panics.
			if err := st.Heartbeat(testbin.Context(t), k, "nobody", time.Now()); err == nil {
				t.Errorf("Heartbeat on a malformed item succeeded")
			}
		})
	}
	// The listing of the workflow returns the items that decode, and names
	// each one it skipped, with its attribute: one bad item never hides
	// the others, nor is it dropped silently.
	acts, err := st.Activities(testbin.Context(t), wf)
	skipped, other := state.Skipped(err)
	if other != nil || !errors.Is(err, state.ErrInvalidItem) {
		t.Fatalf("Activities over malformed items: got %v, want a *SkippedError", err)
	}
	good, bad := 0, map[string]string{}
	for i, tc := range tests {
		if tc.wantAttr == "" {
			good++
		} else {
			bad[state.ActivityExecIDFor(wf, fmt.Sprintf("act-%d", i))] = tc.wantAttr
		}
	}
	if len(acts) != good {
		t.Errorf("Activities returned %d items, want the %d that decode", len(acts), good)
	}
	if len(skipped) != len(bad) {
		t.Errorf("Activities skipped %d items, want %d", len(skipped), len(bad))
	}
	for _, de := range skipped {
		if want, ok := bad[de.ID]; !ok || de.Attr != want || de.Table == "" || !strings.Contains(de.Key, wf) {
			t.Errorf("skipped %+v: want one of the malformed items, its attribute %q, its table and its whole key", *de, want)
		}
	}
}

func testStateIndex(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "index", DAG{"a": nil, "b": nil, "c": nil, "d": {"a"}})
	Create(t, st, w)
	before := time.Now()
	time.Sleep(5 * time.Millisecond)
	for _, n := range []string{"a", "b", "c"} {
		move(t, st, Key(w, n), state.Requested, state.Ready)
	}
	move(t, st, Key(w, "c"), state.Ready, state.Queued)

	// The index is eventually consistent: poll, bounded.
	want := []string{Key(w, "a").ActivityExecID, Key(w, "b").ActivityExecID}
	sort.Strings(want)
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, r := range refs {
			if r.WorkflowExecID != w.Exec.WorkflowExecID || r.StateTime.Before(before) {
				t.Errorf("ref %+v: wrong workflow or state time", r)
			}
			got = append(got, r.ActivityExecID)
		}
		sort.Strings(got)
		if strings.Join(got, ",") == strings.Join(want, ",") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("READY activities: %v, want %v", got, want)
	}
	refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready, Limit: 1})
	if err != nil || len(refs) != 1 {
		t.Errorf("with Limit 1: %d refs, %v", len(refs), err)
	}
	refs, err = st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready, Before: before})
	if err != nil || len(refs) != 0 {
		t.Errorf("READY before the moves: %+v, %v; want none", refs, err)
	}
	// The state index is sparse: an activity that ended is in none of
	// its listings, and a terminal state is refused.
	if _, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Completed}); err == nil {
		t.Error("COMPLETED activities were listed; want an error: the index holds live states only")
	}
}

func testWorkflowMoves(t *testing.T, h Harness) {
	st := h.New(t)
	w1 := NewWorkflow(t, "moves", DAG{"a": nil})
	Create(t, st, w1)
	time.Sleep(5 * time.Millisecond)
	w2 := NewWorkflow(t, "moves", DAG{"a": nil})
	Create(t, st, w2)

	_, err := st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowRequested})
	var te *state.TransitionError
	if !errors.As(err, &te) {
		t.Errorf("RUNNING → REQUESTED: got %v, want a *TransitionError", err)
	}
	done, err := st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed, Reason: "activity a FAILED"})
	if err != nil {
		t.Fatal(err)
	}
	if done.State != state.WorkflowFailed || done.EndTime.IsZero() || done.Reason != "activity a FAILED" {
		t.Errorf("settled workflow: %+v", *done)
	}
	_, err = st.UpdateWorkflow(testbin.Context(t), w1.Exec.WorkflowExecID, state.WorkflowChange{
		From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCompleted})
	if ce := conflict(t, err); ce.State != string(state.WorkflowFailed) {
		t.Errorf("second settle conflict names %s, want FAILED", ce.State)
	}

	var running []*state.WorkflowExec
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err = st.Workflows(testbin.Context(t), state.WorkflowQuery{State: state.WorkflowRunning})
		if err != nil {
			t.Fatal(err)
		}
		if len(running) == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(running) != 1 || running[0].WorkflowExecID != w2.Exec.WorkflowExecID {
		t.Errorf("RUNNING workflows: %+v, want only %s", running, w2.Exec.WorkflowExecID)
	}
	failed, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{State: state.WorkflowFailed, Since: w1.Exec.StartTime})
	if err != nil || len(failed) != 1 || failed[0].Reason != "activity a FAILED" {
		t.Errorf("FAILED workflows since its start: %+v, %v", failed, err)
	}

	// By name, any state, newest first; by name and state; every state.
	time.Sleep(5 * time.Millisecond) // a start time of its own: newest first must be decidable
	other := NewWorkflow(t, "other", DAG{"a": nil})
	Create(t, st, other)
	byName, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: "moves"})
	if err != nil || len(byName) != 2 || byName[0].WorkflowExecID != w2.Exec.WorkflowExecID || byName[1].State != state.WorkflowFailed {
		t.Errorf("workflows named moves: %+v, %v; want w2 then the FAILED w1", byName, err)
	}
	for _, w := range byName {
		if w.Definition != "" {
			t.Errorf("a listing carries the definition of %s", w.WorkflowExecID)
		}
	}
	named, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Name: "moves", State: state.WorkflowFailed})
	if err != nil || len(named) != 1 || named[0].WorkflowExecID != w1.Exec.WorkflowExecID {
		t.Errorf("FAILED workflows named moves: %+v, %v", named, err)
	}
	all, err := st.Workflows(testbin.Context(t), state.WorkflowQuery{Limit: 2})
	if err != nil || len(all) != 2 || all[0].WorkflowExecID != other.Exec.WorkflowExecID {
		t.Errorf("the 2 newest workflows: %+v, %v; want other first", all, err)
	}
}

func testPreconditions(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "pre", DAG{"a": nil, "b": {"a"}})
	Create(t, st, w)
	b := Key(w, "b")
	for _, to := range []state.ActivityState{state.Ready, state.Queued} {
		_, err := st.UpdateActivity(testbin.Context(t), b, state.ActivityChange{From: []state.ActivityState{state.Requested}, To: to})
		if ce := conflict(t, err); ce.State != string(state.Requested) || !strings.Contains(err.Error(), "nothing pending") {
			t.Errorf("REQUESTED → %s with a pending dependency: %v; want a conflict saying something is pending", to, err)
		}
	}
	a := Key(w, "a")
	move(t, st, a, state.Requested, state.Queued)
	for _, c := range []*state.Claim{nil, {Owner: ""}} {
		_, err := st.UpdateActivity(testbin.Context(t), a, state.ActivityChange{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: c})
		if err == nil || errors.Is(err, state.ErrConflict) || !strings.Contains(err.Error(), "owner") {
			t.Errorf("RUNNING with claim %+v: got %v, want a refusal before writing", c, err)
		}
	}
	if got, err := st.GetActivity(testbin.Context(t), a); err != nil || got.State != state.Queued {
		t.Errorf("after refused claims: %+v, %v; want QUEUED", got, err)
	}
}

func testHeartbeatSeen(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "seen", DAG{"a": nil, "b": nil})
	Create(t, st, w)
	claimed := map[string]*state.ActivityExec{}
	for _, n := range []string{"a", "b"} {
		move(t, st, Key(w, n), state.Requested, state.Queued)
		a, err := st.UpdateActivity(testbin.Context(t), Key(w, n), state.ActivityChange{
			From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("o-" + n)})
		if err != nil {
			t.Fatal(err)
		}
		claimed[n] = a
	}
	timeout := func(k state.ActivityKey, seen time.Time) error {
		_, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
			From: []state.ActivityState{state.Running}, To: state.TimedOut, HeartbeatSeen: &seen})
		return err
	}

	// a beat after the monitor looked: the timeout loses.
	time.Sleep(5 * time.Millisecond) // past the claim's own heartbeat
	beat := state.Truncate(time.Now())
	if err := st.Heartbeat(testbin.Context(t), Key(w, "a"), "o-a", beat); err != nil {
		t.Fatal(err)
	}
	if err := timeout(Key(w, "a"), time.Time{}); !errors.Is(err, state.ErrConflict) {
		t.Errorf("timeout judged on no heartbeat, after one landed: %v, want a conflict", err)
	}
	if err := timeout(Key(w, "a"), claimed["a"].HeartbeatTime); !errors.Is(err, state.ErrConflict) {
		t.Errorf("timeout judged on the claim's heartbeat, after a newer one landed: %v, want a conflict", err)
	}
	if err := timeout(Key(w, "a"), beat.Add(-time.Second)); !errors.Is(err, state.ErrConflict) {
		t.Errorf("timeout judged on an older heartbeat: %v, want a conflict", err)
	}
	if err := timeout(Key(w, "a"), beat); err != nil {
		t.Errorf("timeout judged on the last heartbeat: %v", err)
	}
	// b never beat after its claim: judged on the claim's heartbeat, the
	// timeout lands; judged on "no heartbeat at all" it does not, as the
	// claim wrote one.
	if err := timeout(Key(w, "b"), time.Time{}); !errors.Is(err, state.ErrConflict) {
		t.Errorf("timeout judged on no heartbeat, though the claim wrote one: %v, want a conflict", err)
	}
	if err := timeout(Key(w, "b"), claimed["b"].HeartbeatTime); err != nil {
		t.Errorf("timeout of an activity that never beat after its claim: %v", err)
	}
}

// seedStale is the base contract's staleness check, exactly: RUNNING, and a
// heartbeat_time_epoch (as written; negative when none) older than the
// timeout.
func seedStale(a *state.ActivityExec, now time.Time, timeout time.Duration) bool {
	epoch := float64(state.NotSet)
	if !a.HeartbeatTime.IsZero() {
		epoch = float64(a.HeartbeatTime.UnixMilli()) / 1000
	}
	return a.State == state.Running && epoch < float64(now.Add(-timeout).UnixMilli())/1000
}

func testClaimWritesTheFirstHeartbeat(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "first", DAG{"on": nil, "off": nil})
	Create(t, st, w)
	for _, n := range []string{"on", "off"} {
		move(t, st, Key(w, n), state.Requested, state.Queued)
	}
	before := state.Truncate(time.Now())
	on, err := st.UpdateActivity(testbin.Context(t), Key(w, "on"), state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("o-on")})
	if err != nil {
		t.Fatal(err)
	}
	if on.HeartbeatTime.IsZero() || on.HeartbeatTime.Before(before) || !on.HeartbeatTime.Equal(on.StartTime) {
		t.Errorf("claim with heartbeats on: heartbeat %v, start %v; want the claim time", on.HeartbeatTime, on.StartTime)
	}
	// Read back as any client would, a seed-exact monitor finds nothing
	// stale right after the claim, judged by the activity's own timeout.
	got, err := st.GetActivity(testbin.Context(t), Key(w, "on"))
	if err != nil {
		t.Fatal(err)
	}
	if seedStale(got, time.Now(), got.HeartbeatTimeout) {
		t.Errorf("right after the claim, a seed-exact staleness check finds it stale: %+v", *got)
	}
	if !seedStale(got, got.StartTime.Add(got.HeartbeatTimeout+time.Second), got.HeartbeatTimeout) {
		t.Errorf("a timeout after the claim with no beat, the same check does not find it stale: the check cannot fail")
	}

	// With heartbeats off, the contract's -1 is written: nothing to judge.
	c := claim("o-off")
	c.HeartbeatEnabled = false
	off, err := st.UpdateActivity(testbin.Context(t), Key(w, "off"), state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: c})
	if err != nil {
		t.Fatal(err)
	}
	if !off.HeartbeatTime.IsZero() || off.HeartbeatEnabled {
		t.Errorf("claim with heartbeats off: heartbeat %v, enabled %v; want none", off.HeartbeatTime, off.HeartbeatEnabled)
	}
}

func testLandedWriteOnMalformedItem(t *testing.T, h Harness) {
	st := h.New(t)
	wf := state.NewWorkflowExecID("odd")
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wf, "a"), WorkflowExecID: wf}
	h.PutForeignActivity(t, st, map[string]any{
		"activity_exec_id": k.ActivityExecID, "workflow_exec_id": wf, "state": "QUEUED",
		"reason": 42, // malformed, and unrelated to a claim
	})
	a, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("first")})
	if err != nil || a.State != state.Running || a.Owner != "first" {
		t.Fatalf("claim of an item with a malformed reason: %+v, %v; the write landed, so it must succeed", a, err)
	}
	_, err = st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{
		From: []state.ActivityState{state.Queued}, To: state.Running, Claim: claim("second")})
	if ce := conflict(t, err); ce.Owner != "first" || ce.State != string(state.Running) {
		t.Errorf("the loser sees %+v, want RUNNING held by first", ce)
	}
	if _, err := st.GetActivity(testbin.Context(t), k); !errors.Is(err, state.ErrInvalidItem) {
		t.Errorf("a plain read still reports the malformed attribute: got %v", err)
	}
}

func testCreateRefusesBadInput(t *testing.T, h Harness) {
	st := h.New(t)
	tests := []struct {
		name string
		edit func(w *state.NewWorkflow)
		want string
	}{
		{"no start time", func(w *state.NewWorkflow) { w.Exec.StartTime = time.Time{} }, "start time"},
		{"no state time", func(w *state.NewWorkflow) { w.Activities[0].StateTime = time.Time{} }, "state time"},
		{"duplicate activity", func(w *state.NewWorkflow) { w.Activities = append(w.Activities, w.Activities[0]) }, "twice"},
		{"pending without a dependency item", func(w *state.NewWorkflow) { w.Dependencies = nil }, "differ"},
		{"dependency of another workflow", func(w *state.NewWorkflow) { w.Dependencies[0].WorkflowExecID = "x" }, "must be an activity"},
		{"not REQUESTED", func(w *state.NewWorkflow) { w.Activities[1].State = state.Ready }, "must be REQUESTED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWorkflow(t, "bad", DAG{"a": nil, "b": {"a"}})
			tc.edit(w)
			err := st.CreateWorkflow(testbin.Context(t), w)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
			if _, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("refused input was written: %v", err)
			}
		})
	}
}

func testExpire(t *testing.T, h Harness) {
	st := h.New(t)
	w := NewWorkflow(t, "old", DAG{"a": nil, "b": {"a"}})
	Create(t, st, w)
	at := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second).UTC()
	if err := st.Expire(testbin.Context(t), w.Exec.WorkflowExecID, at); err != nil {
		t.Fatalf("Expire: %v", err)
	}
	wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || !wf.Expires.Equal(at) {
		t.Errorf("workflow expires %v (%v), want %v", wf.Expires, err, at)
	}
	acts, err := st.Activities(testbin.Context(t), w.Exec.WorkflowExecID)
	if err != nil || len(acts) != 2 {
		t.Fatal(acts, err)
	}
	for _, a := range acts {
		if !a.Expires.Equal(at) {
			t.Errorf("activity %s expires %v, want %v", a.ActivityName, a.Expires, at)
		}
	}
	if err := st.Expire(testbin.Context(t), state.NewWorkflowExecID("ghost"), at); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Expire of a missing workflow: %v, want ErrNotFound", err)
	}
}

// Helpers for the suites of what extends a store (simpleapi/inboxtest).

// Move changes an activity's state without fencing, failing the test on
// error.
func Move(t *testing.T, st state.Store, k state.ActivityKey, from, to state.ActivityState) *state.ActivityExec {
	t.Helper()
	return move(t, st, k, from, to)
}

// Claim is a claim by owner, with heartbeats.
func Claim(owner string) *state.Claim { return claim(owner) }

// Conflict fails the test unless err is a *state.ConflictError, and
// returns it.
func Conflict(t *testing.T, err error) *state.ConflictError {
	t.Helper()
	return conflict(t, err)
}
