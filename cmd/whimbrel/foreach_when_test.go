package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

const forEachWhenWorkflow = `
name: fe-when
params:
  log: {required: true}
activities:
  evens:
    for_each: [1, 2, 3, 4]
    when: "item % 2 == 0 && item_index >= 0"
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"evens $0\" >> \"$LOG\"", "{{ item }}"]
  after:
    depends_on: [evens]
    env: {LOG: "{{ params.log }}", N: "{{ outputs.evens.items }}/{{ outputs.evens.completed }}/{{ outputs.evens.failed }}"}
    command: ["sh", "-c", "echo \"after $N\" >> \"$LOG\""]
  bad:
    for_each: [{k: 1}, {k: "x"}]
    when: "item.k > 0"
    tolerated_failures: 1
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"bad $0\" >> \"$LOG\"", "{{ item.k }}"]
  never:
    for_each: [1, 2]
    when: "workflow.name == 'other'"
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"never $0\" >> \"$LOG\"", "{{ item }}"]
`

// TestForEachWhen: a when that reads item is judged per element, where
// the element is about to run: elements 1 and 3 (values 2 and 4) run, 0
// and 2 are SKIPPED and counted as completed by the map, which its
// downstream sees; an element whose when cannot be evaluated fails with
// the expression named; a when that reads no element skips the whole map.
func TestForEachWhen(t *testing.T) {
	t.Parallel()
	for name, env := range forEachStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			out, errOut, code := runIn(t, dir, env, writeDefinition(t, forEachWhenWorkflow), "--param", "log="+log)
			if code != 0 || !strings.Contains(out, "COMPLETED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			want := []string{"after 4/4/0", "bad 1", "evens 2", "evens 4"}
			if got := logLines(t, log); !slices.Equal(got, want) {
				t.Errorf("the commands that ran: %q, want %q", got, want)
			}
			st := openStore(t, dir, env)
			wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{Name: "fe-when"})
			if err != nil || len(wfs) != 1 {
				t.Fatalf("workflows: %v %v", wfs, err)
			}
			id := wfs[0].WorkflowExecID
			status := func(args ...string) (string, int) {
				a := append(append([]string{"status"}, storeArgs(dir, env)...), args...)
				out, _, code := whimbrelIn(t, dir, env, append(a, id)...)
				return out, code
			}
			js, code := status("--items", "--json")
			if code != 0 {
				t.Fatalf("status --items --json: exit %d\n%s", code, js)
			}
			var pages []struct {
				Activity string `json:"activity"`
				Items    []struct {
					Index   int    `json:"item_index"`
					State   string `json:"state"`
					Shown   string `json:"shown"`
					Skipped bool   `json:"skipped"`
					Reason  string `json:"reason"`
				} `json:"items"`
			}
			if err := json.Unmarshal([]byte(js), &pages); err != nil {
				t.Fatalf("status --items --json: %v\n%s", err, js)
			}
			seen := map[string][]string{}
			for _, p := range pages {
				for _, it := range p.Items {
					s := it.State
					if it.Skipped {
						s = it.Shown
					}
					seen[p.Activity] = append(seen[p.Activity], s)
					if it.Skipped && (it.State != "COMPLETED" || !strings.Contains(it.Reason, `when "item % 2 == 0 && item_index >= 0" is false`)) {
						t.Errorf("%s[%d]: skipped %s with reason %q", p.Activity, it.Index, it.State, it.Reason)
					}
					if it.State == "FAILED" && !strings.Contains(it.Reason, `when "item.k > 0"`) {
						t.Errorf("%s[%d] failed with reason %q, which does not name the expression", p.Activity, it.Index, it.Reason)
					}
				}
			}
			if got, want := seen["evens"], []string{"SKIPPED", "COMPLETED", "SKIPPED", "COMPLETED"}; !slices.Equal(got, want) {
				t.Errorf("evens' elements: %q, want %q\n%s", got, want, js)
			}
			if got, want := seen["bad"], []string{"COMPLETED", "FAILED"}; !slices.Equal(got, want) {
				t.Errorf("bad's elements: %q, want %q\n%s", got, want, js)
			}
			if view, _ := status(); !regexpMatch(`never\s+SKIPPED`, view) {
				t.Errorf("the map whose when is false is not shown SKIPPED:\n%s", view)
			}
			items, _ := status("--items", "--activity", "evens")
			if !regexpMatch(`evens\[0\]\s+SKIPPED`, items) || !regexpMatch(`evens\[1\]\s+COMPLETED`, items) {
				t.Errorf("status --items does not show evens[0] SKIPPED and evens[1] COMPLETED:\n%s", items)
			}
		})
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
