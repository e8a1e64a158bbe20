package main

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

// TestRunMapOfChildren: a for_each activity whose elements each run a
// child workflow, on both stores through whimbrel run: 20 children, one
// per element, each given its element as a param and naming its parent
// element; the map completes and its downstream reads the counts.
func TestRunMapOfChildren(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"parent.yaml": `name: fan
activities:
  ingest:
    for_each: {count: 20}
    workflow: child.yaml
    params: {source: "src-{{ item_index }}"}
  after:
    depends_on: [ingest]
    command: ["sh", "-c", "test {{ outputs.ingest.completed }} = 20"]
`,
				"child.yaml": `name: child
params:
  source: {}
activities:
  load:
    command: ["sh", "-c", "echo loaded {{ params.source }}"]
`,
			})
			out, errOut, code := runIn(t, dir, env, filepath.Join(dir, "parent.yaml"))
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			st := openStore(t, dir, env)
			children := childrenOf(t, st, "child")
			if len(children) != 20 {
				t.Fatalf("%d child executions, want 20 (one per element)", len(children))
			}
			var sources []string
			for _, c := range children {
				if c.State != state.WorkflowCompleted {
					t.Errorf("child %s is %s, want COMPLETED", c.WorkflowExecID, c.State)
				}
				p, err := st.GetActivity(context.Background(), c.Parent.Key())
				if err != nil {
					t.Fatal(err)
				}
				if p.ItemIndex == nil || p.State != state.Completed {
					t.Errorf("parent of %s: %s, element %v; want a COMPLETED element of the map", c.WorkflowExecID, p.State, p.ItemIndex)
				}
				sources = append(sources, c.Params)
			}
			sort.Strings(sources)
			joined := strings.Join(sources, " ")
			for _, want := range []string{`"src-0"`, `"src-19"`} {
				if !strings.Contains(joined, want) {
					t.Errorf("children's params %s; want one with %s", joined, want)
				}
			}
		})
	}
}
