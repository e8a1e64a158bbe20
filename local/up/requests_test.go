package up_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/local/up"
	"github.com/whimbrel/whimbrel/simpleapi"
	"github.com/whimbrel/whimbrel/simpleapi/inbox"
	"github.com/whimbrel/whimbrel/simpleapi/sqliteinbox"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

type embedded struct {
	*sqlite.Store
	*sqliteinbox.Inbox
}

// TestPassRequestsStartsEachRequestOnce: a pass starts the pending
// request and clears its mark; a mark left by a process killed after the
// start is handed over again and starts nothing more; a request for an
// unregistered workflow is rejected and its mark cleared.
func TestPassRequestsStartsEachRequestOnce(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	rq := embedded{st, sqliteinbox.New(st)}
	def, err := definition.Parse("hello.yaml", []byte("name: hello\nactivities:\n  say:\n    command: [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := inbox.Register(ctx, rq, def, "", "test"); err != nil {
		t.Fatal(err)
	}
	id, err := inbox.Request(ctx, rq, "hello", inbox.RequestOptions{ID: "r1", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p := simpleapi.New(simpleapi.Config{Store: rq, Name: "whimbrel-up"})
	log := hclog.NewNullLogger()
	if n := up.PassRequests(ctx, rq, p, log); n != 1 {
		t.Fatalf("first pass finished %d requests, want 1", n)
	}
	if _, err := st.GetWorkflow(ctx, id); err != nil {
		t.Fatalf("the request's execution %s: %v", id, err)
	}
	if got, _ := rq.PendingRequests(ctx, 10); len(got) != 0 {
		t.Fatalf("pending after the pass = %v, want none", got)
	}
	if n := up.PassRequests(ctx, rq, p, log); n != 0 {
		t.Fatalf("a pass with nothing pending finished %d", n)
	}
	// Killed after the start, before the mark was cleared: the mark is
	// back, the next pass hands it over again, and one execution stands.
	if err := st.Do(ctx, func(tx *sqlite.Tx) error { return tx.Mark("workflow_request", "r1", "hello") }); err != nil {
		t.Fatal(err)
	}
	if n := up.PassRequests(ctx, rq, p, log); n != 1 {
		t.Fatalf("the pass after a crash finished %d requests, want 1", n)
	}
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(wfs) != 1 || wfs[0].WorkflowExecID != id {
		t.Fatalf("executions = %d, want only %s", len(wfs), id)
	}
	// A request whose workflow was never registered is rejected, once.
	r := &state.WorkflowRequest{WorkflowRequestID: "<script>", WorkflowName: "nope", When: state.Truncate(time.Now())}
	if err := rq.PutRequest(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n := up.PassRequests(ctx, rq, p, log); n != 1 {
		t.Fatalf("the pass over an unregistered request finished %d, want 1", n)
	}
	got, err := rq.GetRequest(ctx, "<script>", "nope")
	if err != nil || got.Outcome.Result != state.OutcomeRejected {
		t.Fatalf("the unregistered request = %+v, %v; want rejected", got, err)
	}
}
