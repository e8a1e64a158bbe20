package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

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
