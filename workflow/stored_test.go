package workflow_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/storetest"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestStoredEntriesMatchParse: every entry read from the stored form is
// what Parse makes of it, with the defaults filled in, and the dependents
// are the entries whose depends_on names the activity.
func TestStoredEntriesMatchParse(t *testing.T) {
	for _, src := range []string{retrying, `name: data
params:
  who: {default: world}
defaults:
  env: {LANG: C}
  heartbeat_interval: 15s
retention: 30d
activities:
  a: {command: ["sh", "-c", "echo {{ params.who }}"], env: {X: "1"}}
  b: {command: ["true"], depends_on: [a], retry: {max_attempts: 2}}
  c: {command: ["echo", "{{ outputs.a.n }}"], depends_on: [a, b]}
  d: {command: ["true"], depends_on: [c], launch: {type: docker, image: alpine}}
`} {
		d, err := workflow.Parse("test.yaml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		// Stored indented, as another writer may: the entries are found all
		// the same.
		var indented strings.Builder
		var v any
		if err := json.Unmarshal([]byte(d.JSON()), &v); err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(v, " ", "\t")
		indented.Write(b)
		for _, text := range []string{d.JSON(), indented.String()} {
			s, err := workflow.ReadStored(text)
			if err != nil {
				t.Fatalf("ReadStored: %v", err)
			}
			if s.Len() != len(d.Activities) || s.Retention() != d.Retention {
				t.Fatalf("Len %d, Retention %v; want %d, %v", s.Len(), s.Retention(), len(d.Activities), d.Retention)
			}
			for name, want := range d.Activities {
				got, err := s.Activity(name)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("Activity(%s) = %+v, %v; want %+v", name, got, err, want)
				}
				eff, err := s.Effective(name)
				if err != nil || !reflect.DeepEqual(eff, d.Effective(name)) {
					t.Errorf("Effective(%s) = %+v, %v; want %+v", name, eff, err, d.Effective(name))
				}
				var want2 []string
				for _, n := range d.Names() {
					for _, up := range d.Activities[n].DependsOn {
						if up == name {
							want2 = append(want2, n)
						}
					}
				}
				deps, err := s.Dependents(name)
				if err != nil || fmt.Sprint(deps) != fmt.Sprint(want2) {
					t.Errorf("Dependents(%s) = %v, %v; want %v", name, deps, err, want2)
				}
			}
			if _, err := s.Activity("nope"); err == nil {
				t.Error("Activity of a name the definition does not hold: no error")
			}
		}
	}
}

// TestStoredReadsOnlyWhatItIsAskedFor is the contract of the stored form:
// an entry that cannot be read (another writer's, or a hand edit) concerns
// the activities that read it, and no other; the full check stays where a
// workflow is started (ParseStored refuses the same text).
func TestStoredReadsOnlyWhatItIsAskedFor(t *testing.T) {
	text := `{"name":"mixed","activities":{
		"a":{"command":["true"]},
		"b":{"command":["true"],"depends_on":["a"]},
		"\u0063":{"command":["true"],"depends_on":["\u0061"]},
		"broken":{"command":"not a list"},
		"lost":{"command":["true"],"depends_on":["nowhere"]},
		"null":null}}`
	if _, err := workflow.ParseStored(text); err == nil {
		t.Fatal("ParseStored accepted a definition with broken entries")
	}
	s, err := workflow.ReadStored(text)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := s.Activity("b"); err != nil || a.DependsOn[0] != "a" {
		t.Fatalf("Activity(b) = %+v, %v", a, err)
	}
	for _, name := range []string{"broken", "lost", "null"} {
		if _, err := s.Activity(name); err == nil {
			t.Errorf("Activity(%s): no error", name)
		} else if !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), "empty") {
			t.Errorf("Activity(%s): %v does not name it", name, err)
		}
	}
	// The escaped entry names a: it is decoded, and found.
	if deps, err := s.Dependents("a"); err != nil || fmt.Sprint(deps) != "[b c]" {
		t.Errorf("Dependents(a) = %v, %v; want [b c]", deps, err)
	}
	// No entry names b; the one with escapes (c) reads well: b has no
	// dependents, whatever the broken entries hold.
	if deps, err := s.Dependents("b"); err != nil || len(deps) != 0 {
		t.Errorf("Dependents(b) = %v, %v; want none", deps, err)
	}

	// An entry that could name the activity and cannot be read is an
	// error: the caller does not guess (Advance asks the index).
	s, err = workflow.ReadStored(`{"name":"x","activities":{"a":{"command":["true"]},"b":{"command":"a","depends_on":["a"]}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if deps, err := s.Dependents("a"); err == nil {
		t.Errorf("Dependents(a) = %v with an unreadable entry that names a; want an error", deps)
	}
}

// TestStoredRefusesABadHead: what concerns every activity is checked at
// once.
func TestStoredRefusesABadHead(t *testing.T) {
	for _, text := range []string{
		``, `[]`, `{"name":"x"}`, `{"name":"x","activities":{}}`, `{"name":"x","activities":[1]}`,
		`{"name":"","activities":{"a":{"command":["true"]}}}`,
		`{"name":"x","defaults":{"launch":{"type":"rocket"}},"activities":{"a":{"command":["true"]}}}`,
		`{"name":"x","params":{"1bad":{}},"activities":{"a":{"command":["true"]}}}`,
	} {
		if _, err := workflow.ReadStored(text); err == nil {
			t.Errorf("ReadStored(%s): no error", text)
		}
	}
}

// TestAdvanceKnownReadiesFromAnUnrelatedlyBrokenDefinition: a wrapper
// whose definition holds a broken entry it does not concern still readies
// its dependents from its own entries.
func TestAdvanceKnownReadiesFromAnUnrelatedlyBrokenDefinition(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		w := storetest.NewWorkflow(t, "mixed", storetest.DAG{"a": nil, "b": {"a"}, "broken": nil})
		w.Exec.Definition = `{"name":"mixed","activities":{"a":{"command":["true"]},"b":{"command":["true"],"depends_on":["a"]},"broken":{"command":7}}}`
		storetest.Create(t, st, w)
		wf, err := st.GetWorkflow(testbin.Context(t), w.Exec.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		a := end(t, st, storetest.Key(w, "a"), state.Completed)
		res, err := workflow.AdvanceKnown(testbin.Context(t), st, wf, a, nil)
		if err != nil || fmt.Sprint(res.Readied) != fmt.Sprint([]string{storetest.Key(w, "b").ActivityExecID}) {
			t.Fatalf("AdvanceKnown = %+v, %v; want b readied", res, err)
		}
	})
}

// TestAdvanceKnownRetriesOnlyInARunningWorkflow: the item the wrapper read
// at its claim says RUNNING; the workflow was cancelled since. The retry
// is decided on the workflow's state now, read again: none is made.
func TestAdvanceKnownRetriesOnlyInARunningWorkflow(t *testing.T) {
	bothStores(t, func(t *testing.T, st state.Store) {
		_, id := startDef(t, st, retrying)
		claimed, err := st.GetWorkflow(testbin.Context(t), id)
		if err != nil || claimed.State != state.WorkflowRunning {
			t.Fatalf("GetWorkflow = %+v, %v", claimed, err)
		}
		k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "fetch"), WorkflowExecID: id}
		failed := end(t, st, k, state.Failed)
		if _, err := st.UpdateWorkflow(testbin.Context(t), id, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRunning}, To: state.WorkflowCancelled, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
		res, err := workflow.AdvanceKnown(testbin.Context(t), st, claimed, failed, nil)
		if err != nil || res.Retried != "" {
			t.Fatalf("AdvanceKnown = %+v, %v; want no retry in a cancelled workflow", res, err)
		}
		if n := len(attempts(t, st, id, "fetch")); n != 1 {
			t.Fatalf("%d attempts of fetch; want 1", n)
		}
	})
}
