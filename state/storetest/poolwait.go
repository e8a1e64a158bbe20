package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
)

// testPoolParking: a parked waiter stays READY for every reader of the
// item, leaves the READY listing for its pool's queue (oldest first), and
// comes back by Unpark or Refill; only a READY activity is parked or put
// back, and a claim takes a parked one out of both listings.
func testPoolParking(t *testing.T, h Harness) {
	ctx := testbin.Context(t)
	st := h.New(t)
	ps, q := pools(t, st), queue(t, st)
	// A full pool of two.
	if _, err := state.SetPool(ctx, ps, "warehouse", 2, "", state.Truncate(time.Now())); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"x::1", "y::1"} {
		if err := state.AcquireSlots(ctx, ps, "warehouse", holder(id, 1, now)); err != nil {
			t.Fatal(err)
		}
	}
	w := NewWorkflow(t, "parks", DAG{"a": nil, "b": nil, "c": nil, "d": nil, "<script>": nil})
	Create(t, st, w)
	order := []string{"c", "a", "<script>", "d"} // the order they become READY
	for i, name := range order {
		moveAt(t, st, Key(w, name), state.Requested, state.Ready, time.Unix(1_700_000_000+int64(i), 0))
	}
	for _, name := range []string{"<script>", "a", "c"} { // parked out of order
		if err := q.Park(ctx, Key(w, name), "warehouse"); err != nil {
			t.Fatalf("park %s: %v", name, err)
		}
	}
	if err := q.Park(ctx, Key(w, "b"), "warehouse"); !errors.Is(err, state.ErrConflict) {
		t.Errorf("parking a REQUESTED activity: %v, want a conflict", err)
	}
	if got := readyNames(t, st); fmt.Sprint(got) != "[d]" {
		t.Errorf("READY listing with three parked: %v, want [d]", got)
	}
	if got := parkedNames(t, q, "warehouse", 0); fmt.Sprint(got) != "[c a <script>]" {
		t.Errorf("parked: %v, want [c a <script>] (oldest first)", got)
	}
	if got := parkedNames(t, q, "other", 0); len(got) != 0 {
		t.Errorf("another pool's queue: %v", got)
	}
	if a, err := st.GetActivity(ctx, Key(w, "a")); err != nil || a.State != state.Ready {
		t.Errorf("a parked activity reads %v, %v; want READY", a, err)
	}

	// A claim of a parked waiter takes it out of both listings.
	if _, err := st.UpdateActivity(ctx, Key(w, "c"), state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "tok"}); err != nil {
		t.Fatal(err)
	}
	if got := parkedNames(t, q, "warehouse", 0); fmt.Sprint(got) != "[a <script>]" {
		t.Errorf("parked after a claim: %v", got)
	}
	if err := q.Unpark(ctx, Key(w, "c")); !errors.Is(err, state.ErrConflict) {
		t.Errorf("putting back a QUEUED activity: %v, want a conflict", err)
	}
	refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Queued})
	if err != nil || len(refs) != 1 {
		t.Errorf("QUEUED listing after claiming a parked waiter: %v, %v; want it", refs, err)
	}

	// Refill puts back one waiter a free slot, oldest first.
	if n, err := state.Refill(ctx, ps, "warehouse"); err != nil || n != 0 {
		t.Fatalf("refill of a full pool: %d, %v; want none", n, err)
	}
	if err := state.ReleaseSlots(ctx, ps, "warehouse", state.ActivityKey{ActivityExecID: "x::1", WorkflowExecID: "wf::1"}); err != nil {
		t.Fatal(err)
	}
	n, err := state.Refill(ctx, ps, "warehouse")
	if err != nil || n != 1 {
		t.Fatalf("refill with one free slot: %d, %v; want 1", n, err)
	}
	if got := readyNames(t, st); fmt.Sprint(got) != "[a d]" {
		t.Errorf("READY listing after a refill: %v, want [a d]", got)
	}
	if n, err := state.Refill(ctx, ps, "undefined"); err != nil || n != 0 {
		t.Errorf("refill of an undefined pool: %d, %v", n, err)
	}
	if n, err := state.UnparkAll(ctx, ps, "warehouse"); err != nil || n != 1 {
		t.Errorf("unpark all: %d, %v; want 1", n, err)
	}
	if got := readyNames(t, st); fmt.Sprint(got) != "[a <script> d]" {
		t.Errorf("READY listing with none parked: %v", got)
	}
	if err := q.Park(ctx, state.ActivityKey{ActivityExecID: "gone::1", WorkflowExecID: w.Exec.WorkflowExecID}, "warehouse"); !errors.Is(err, state.ErrConflict) && !errors.Is(err, state.ErrNotFound) {
		t.Errorf("parking an activity that does not exist: %v", err)
	}
	if got := parkedNames(t, q, "warehouse", 0); len(got) != 0 {
		t.Errorf("parked at the end: %v", got)
	}
}

func queue(t *testing.T, st state.Store) state.PoolQueue {
	t.Helper()
	q, ok := st.(state.PoolQueue)
	if !ok {
		t.Fatalf("%T is not a state.PoolQueue", st)
	}
	return q
}

func moveAt(t *testing.T, st state.Store, k state.ActivityKey, from, to state.ActivityState, at time.Time) {
	t.Helper()
	if _, err := st.UpdateActivity(testbin.Context(t), k, state.ActivityChange{From: []state.ActivityState{from}, To: to, At: at}); err != nil {
		t.Fatalf("move %s to %s: %v", k.ActivityExecID, to, err)
	}
}

func readyNames(t *testing.T, st state.Store) []string {
	t.Helper()
	refs, err := st.ActivitiesInState(testbin.Context(t), state.ActivityQuery{State: state.Ready})
	if err != nil {
		t.Fatal(err)
	}
	return names(refs)
}

func parkedNames(t *testing.T, q state.PoolQueue, pool string, limit int) []string {
	t.Helper()
	refs, err := q.Parked(context.Background(), pool, limit)
	if err != nil {
		t.Fatal(err)
	}
	return names(refs)
}

func names(refs []state.ActivityRef) []string {
	var out []string
	for _, r := range refs {
		n, _, _ := strings.Cut(r.ActivityExecID, "::")
		out = append(out, n)
	}
	return out
}
