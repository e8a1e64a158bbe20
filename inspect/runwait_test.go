package inspect_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestListSaysWhyARunWaits: of three starts of a workflow with
// max_active_runs 1, the listing shows the two that wait REQUESTED with
// the reason status gives; the running one, and a REQUESTED execution of
// a workflow with no limit, show none.
func TestListSaysWhyARunWaits(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("n.yaml", []byte("name: nightly\nconcurrency: {max_active_runs: 1}\nactivities:\n  a: {command: ['true']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows, err := inspect.List(ctx, st, state.WorkflowQuery{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const why = "waiting: 1 of max_active_runs 1 running"
	byID := map[string]inspect.Workflow{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	if r := byID[ids[0]]; r.State != state.WorkflowRunning || r.Reason != "" {
		t.Errorf("the first run: %s %q, want RUNNING with no reason", r.State, r.Reason)
	}
	for _, id := range ids[1:] {
		if r := byID[id]; r.State != state.WorkflowRequested || r.Reason != why {
			t.Errorf("a waiting run: %s %q, want REQUESTED %q", r.State, r.Reason, why)
		}
	}
	var buf bytes.Buffer
	if err := inspect.WriteList(&buf, rows); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(buf.String(), why); n != 2 {
		t.Errorf("the listing says %q %d times, want 2:\n%s", why, n, buf.String())
	}
}
