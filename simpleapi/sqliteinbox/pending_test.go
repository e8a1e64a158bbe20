package sqliteinbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestRequestsAreMarkedPending: a request is marked pending in the
// transaction that writes it, a refused duplicate adds no mark, the mark
// survives a store closed and opened again (a process killed before
// clearing it), and RequestDone clears it.
func TestRequestsAreMarkedPending(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() (*sqlite.Store, *sqliteinbox.Inbox) {
		st, err := sqlite.Open(path, sqlite.Options{Prefix: "p_"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Install(ctx, false); err != nil {
			t.Fatal(err)
		}
		return st, sqliteinbox.New(st)
	}
	st, in := open()
	if got, err := in.PendingRequests(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("pending in a new store = %v, %v; want none", got, err)
	}
	hostile := "<script>\x1b[31m"
	for _, id := range []string{"first", hostile} {
		r := &state.WorkflowRequest{WorkflowRequestID: id, WorkflowName: "hello", When: state.Truncate(time.Now())}
		if err := in.PutRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dup := &state.WorkflowRequest{WorkflowRequestID: "first", WorkflowName: "hello", When: state.Truncate(time.Now()), Source: "again"}
	if err := in.PutRequest(ctx, dup); !errors.Is(err, state.ErrExists) {
		t.Fatalf("PutRequest of the same ID again = %v, want ErrExists", err)
	}
	want := []sqliteinbox.PendingRequest{{ID: "first", WorkflowName: "hello"}, {ID: hostile, WorkflowName: "hello"}}
	check := func(in *sqliteinbox.Inbox, want []sqliteinbox.PendingRequest) {
		t.Helper()
		got, err := in.PendingRequests(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("pending = %q, want %q", got, want)
		}
		seen := map[sqliteinbox.PendingRequest]bool{}
		for _, p := range got {
			seen[p] = true
		}
		for _, p := range want {
			if !seen[p] {
				t.Fatalf("pending = %q, want %q", got, want)
			}
		}
	}
	check(in, want)
	if got, _ := in.PendingRequests(ctx, 1); len(got) != 1 {
		t.Errorf("PendingRequests(1) listed %d", len(got))
	}
	img, err := in.RequestImage(ctx, want[1])
	if err != nil || img == nil {
		t.Fatalf("RequestImage = %v, %v", img, err)
	}
	// A process killed here leaves the marks for the next one.
	st.Close()
	st, in = open()
	defer st.Close()
	check(in, want)
	if err := in.RequestDone(ctx, want[0]); err != nil {
		t.Fatal(err)
	}
	if err := in.RequestDone(ctx, want[0]); err != nil { // twice: harmless
		t.Fatal(err)
	}
	check(in, want[1:])
	if img, err := in.RequestImage(ctx, sqliteinbox.PendingRequest{ID: "gone", WorkflowName: "hello"}); img != nil || err != nil {
		t.Errorf("RequestImage of a missing request = %v, %v; want nil, nil", img, err)
	}
}
