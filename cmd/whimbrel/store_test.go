package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestOneStoreForEveryCommand runs a workflow with no flags, then reads it
// back with list and status, with no flags, from a sub-folder: every
// command finds the embedded store whimbrel run made.
func TestOneStoreForEveryCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sub := filepath.Join(dir, "src", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runIn(t, dir, nil, example(t, "etl.yaml"))
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	db := filepath.Join(dir, ".whimbrel", "state.db")

	out, errOut, code = whimbrelIn(t, sub, nil, "--log-level", "debug", "list", "--json")
	if code != 0 {
		t.Fatalf("list: exit %d\n%s", code, errOut)
	}
	if want := "store=sqlite:" + db; !strings.Contains(errOut, want) {
		t.Errorf("list's debug log does not say %s:\n%s", want, errOut)
	}
	var rows []struct {
		ID    string `json:"workflow_exec_id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].State != "COMPLETED" {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	out, errOut, code = whimbrelIn(t, sub, nil, "status", rows[0].ID)
	if code != 0 || !strings.Contains(out, "COMPLETED") || !strings.Contains(out, "load") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, errOut)
	}
	// An ID the store does not hold: the error names the store.
	missing := "nightly-etl::00000000-0000-5000-8000-000000000000"
	_, errOut, code = whimbrelIn(t, sub, nil, "status", missing)
	if code != 1 || !strings.Contains(errOut, db) {
		t.Errorf("status of a missing execution: exit %d, want 1 and the store named:\n%s", code, errOut)
	}
	// A listing that finds nothing names the store it looked in.
	_, errOut, code = whimbrelIn(t, sub, nil, "list", "--workflow", "none-such")
	if code != 0 || !strings.Contains(errOut, "no executions match in store sqlite:"+db) {
		t.Errorf("an empty list: exit %d, want the store named:\n%s", code, errOut)
	}
	// A store named explicitly wins; a read of a file not there says so
	// instead of creating it.
	_, errOut, code = whimbrelIn(t, sub, nil, "list", "--store", "sqlite:nothere.db")
	if code != cli.ExitStore || !strings.Contains(errOut, "does not exist") {
		t.Errorf("list on a missing store file: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(sub, "nothere.db")); err == nil {
		t.Error("list created the store file it was asked to read")
	}
}

// TestStoreFallsBackToDynamoDB: with no store named and none found, the
// commands go to DynamoDB.
func TestStoreFallsBackToDynamoDB(t *testing.T) {
	t.Parallel()
	var env []string
	for _, e := range dynamotest.Env(t, dynamotest.Prefix(t)) {
		if !strings.HasPrefix(e, "WHIMBREL_STORE=") {
			env = append(env, e)
		}
	}
	if _, errOut, code := whimbrelIn(t, t.TempDir(), env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	dir := t.TempDir()
	_, errOut, code := whimbrelIn(t, dir, env, "--log-level", "debug", "list")
	if code != 0 || !strings.Contains(errOut, "store=dynamodb") {
		t.Errorf("list with no store: exit %d, want it on DynamoDB:\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, ".whimbrel")); err == nil {
		t.Error("list made an embedded store")
	}
}

// TestStartAndRerunOnAFreshEmbeddedStore: start on a file that does not
// exist yet creates the tables and runs the workflow to its end here, as
// rerun does; --detach only starts it and says that whimbrel up must serve
// the store (with --store naming it, as the store was chosen).
func TestStartAndRerunOnAFreshEmbeddedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(t.TempDir(), "fresh", "s.db")}
	file := writeFile(t, "etl.yaml", etl)

	out, errOut, code := whimbrelIn(t, dir, store, "start", file)
	if code != 0 || !strings.Contains(out, "COMPLETED in") {
		t.Fatalf("start on a fresh embedded store: exit %d\n%s\n%s", code, out, errOut)
	}
	id := strings.Fields(strings.SplitN(out, "\n", 2)[0])[1]

	out, errOut, code = whimbrelIn(t, dir, store, "rerun", id)
	if code != 0 || !strings.Contains(out, "COMPLETED in") {
		t.Fatalf("rerun on the embedded store: exit %d\n%s\n%s", code, out, errOut)
	}

	out, errOut, code = whimbrelIn(t, dir, store, "start", "--detach", file)
	if code != 0 {
		t.Fatalf("start --detach: exit %d\n%s", code, errOut)
	}
	detached := strings.TrimSpace(out)
	if want := "`whimbrel up --store " + strings.TrimPrefix(store[0], "WHIMBREL_STORE=") + "`"; strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
		t.Errorf("start --detach: want one line naming %s on stderr, got:\n%s", want, errOut)
	}
	out, errOut, code = whimbrelIn(t, dir, store, "status", "--json", detached)
	if code != 0 || !strings.Contains(out, `"state": "RUNNING"`) || strings.Contains(out, `"COMPLETED"`) {
		t.Errorf("a detached start runs nothing: exit %d\n%s\n%s", code, out, errOut)
	}
	_, errOut, code = whimbrelIn(t, dir, store, "rerun", "--detach", id)
	if code != 0 || !strings.Contains(errOut, "nothing runs it until whimbrel up serves") {
		t.Errorf("rerun --detach: exit %d\n%s", code, errOut)
	}
}

// TestEscapesShownInert: what a hostile or broken client wrote into an
// execution reaches the terminal escaped from list and status, and exact
// from --json.
func TestEscapesShownInert(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Parse("w.yaml", []byte(etl))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "src\x1b]0;title\a"})
	if err != nil {
		t.Fatal(err)
	}
	const hostile = "boom\x1b[2J\x1b[H\a"
	if _, err := st.UpdateWorkflow(ctx, id, state.WorkflowChange{From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowFailed, Reason: hostile}); err != nil {
		t.Fatal(err)
	}
	env := []string{"WHIMBREL_STORE=sqlite:" + path}
	for _, args := range [][]string{{"list"}, {"status", id}} {
		out, errOut, code := whimbrelIn(t, t.TempDir(), env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		if strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("%v prints raw control characters:\n%q", args, out)
		}
		if !strings.Contains(out, `boom\x1b[2J\x1b[H\a`) {
			t.Errorf("%v does not show the reason escaped:\n%s", args, out)
		}
	}
	out, _, code := whimbrelIn(t, t.TempDir(), env, "status", "--json", id)
	var s struct {
		Workflow struct {
			Reason string `json:"reason"`
			Source string `json:"source"`
		} `json:"workflow"`
	}
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || s.Workflow.Reason != hostile || s.Workflow.Source != "src\x1b]0;title\a" {
		t.Errorf("status --json does not keep the exact values (exit %d, %v): %+v", code, err, s.Workflow)
	}
}
