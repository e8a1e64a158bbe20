package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// behindProxy returns a store reaching DynamoDB Local through the fault
// proxy's faulty side, and a client on its clean side, with the tables
// installed.
func behindProxy(t *testing.T, f dynamotest.Faults) (*dynamodb.Store, *dynamotest.FaultProxy) {
	t.Helper()
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
	prefix := dynamotest.Prefix(t)
	clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := clean.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	p.SetFaults(f)
	return dynamodb.New(p.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), p
}

// TestAdoptShortPages: DynamoDB ends a Scan's page at 1 MB, however high
// its Limit: a table of large items (workflows carry their definitions)
// comes in pages far smaller than AdoptPageItems. An adoption pass of one
// page still covers AdoptPageItems items of each table, not one short
// page of them.
func TestAdoptShortPages(t *testing.T) {
	t.Parallel()
	st, p := behindProxy(t, dynamotest.Faults{PageSize: 5})
	client := p.Client(true)
	now := time.Now().Truncate(time.Second)
	wf := putRawWorkflow(t, client, st.Prefix(), uuid.NewString(), state.WorkflowRunning, now)
	var want []string
	for i := range 23 {
		want = append(want, putRaw(t, client, st.Prefix(), wf, fmt.Sprintf("a%02d", i), state.Ready, now).ActivityExecID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := st.Adopt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(want)+1 {
		t.Errorf("one pass of one page stamped %d items in pages of 5; want all %d (the workflow and its activities)", n, len(want)+1)
	}
	if s := p.Stats(); s.Paged == 0 {
		t.Errorf("the proxy cut no page: %s", s)
	}
}

// TestTransactionConflict: DynamoDB cancels a transaction that meets
// another on one of its items (TransactionConflict), which the emulator
// never does. The store reports it as a failure to try again, never as a
// conflict of its own conditions (someone else moved first) or as an
// existing item, and nothing is written.
func TestTransactionConflict(t *testing.T) {
	t.Parallel()
	st, p := behindProxy(t, dynamotest.Faults{Conflicts: 1})
	clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: st.Prefix(), CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := state.Truncate(time.Now())
	s := &state.Schedule{Name: "after-up", WorkflowName: "etl", Definition: `{"name":"etl"}`, After: "up", Threshold: 2, SetTime: now}
	err := st.PutSchedule(ctx, s, 0, "up::1")
	if err == nil || errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrExists) {
		t.Errorf("a cancelled transaction: %v; want an error that is neither a conflict nor an existing item", err)
	}
	if _, err := clean.GetSchedule(ctx, "after-up"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("after the cancelled transaction the schedule is there (%v): it wrote something", err)
	}
	if s := p.Stats(); s.Conflicts == 0 {
		t.Errorf("no transaction was cancelled: %s", s)
	}
}

// TestListingsThroughShortPagesAndPartialBatches: every listing follows
// LastEvaluatedKey through pages of 5 items and reads again what a batch
// left unprocessed, so it returns every item.
func TestListingsThroughShortPagesAndPartialBatches(t *testing.T) {
	t.Parallel()
	st, p := behindProxy(t, dynamotest.Faults{PageSize: 5, PartialBatches: true})
	clean := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: st.Prefix(), CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 37
	w := wideWorkflow(t, "pages", n-1)
	if err := clean.CreateWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	acts, err := st.Activities(ctx, w.Exec.WorkflowExecID)
	if err != nil || len(acts) != n {
		t.Errorf("Activities: %d, %v; want %d", len(acts), err, n)
	}
	deps, err := st.Dependencies(ctx, w.Exec.WorkflowExecID)
	if err != nil || len(deps) != n-1 {
		t.Errorf("Dependencies: %d, %v; want %d", len(deps), err, n-1)
	}
	refs, err := st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Requested})
	if err != nil || len(refs) != n {
		t.Errorf("ActivitiesInState: %d, %v; want %d", len(refs), err, n)
	}
	refs, err = st.ActivitiesInState(ctx, state.ActivityQuery{State: state.Requested, Limit: 7})
	if err != nil || len(refs) != 7 {
		t.Errorf("ActivitiesInState with a limit of 7: %d, %v", len(refs), err)
	}
	if s := p.Stats(); s.Paged == 0 || s.PartialBatches == 0 {
		t.Errorf("the proxy cut no page or batch: %s", s)
	}
}
