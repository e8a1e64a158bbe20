package dynamodb_test

import (
	"context"
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
