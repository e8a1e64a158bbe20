package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

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
