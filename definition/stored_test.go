package definition_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
)

// retrying is a workflow whose first activity may be retried; after waits
// on it.
const retrying = `name: flaky
defaults:
  retry: {max_attempts: 3, interval: 300ms, backoff_rate: 2, jitter: none}
activities:
  fetch: {command: ["true"]}
  after: {command: ["true"], depends_on: [fetch]}
`

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
		d, err := definition.Parse("test.yaml", []byte(src))
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
			s, err := definition.ReadStored(text)
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
// workflow is started (FromJSON refuses the same text).
func TestStoredReadsOnlyWhatItIsAskedFor(t *testing.T) {
	text := `{"name":"mixed","activities":{
		"a":{"command":["true"]},
		"b":{"command":["true"],"depends_on":["a"]},
		"\u0063":{"command":["true"],"depends_on":["\u0061"]},
		"broken":{"command":"not a list"},
		"lost":{"command":["true"],"depends_on":["nowhere"]},
		"null":null}}`
	if _, err := definition.FromJSON(text); err == nil {
		t.Fatal("FromJSON accepted a definition with broken entries")
	}
	s, err := definition.ReadStored(text)
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
	s, err = definition.ReadStored(`{"name":"x","activities":{"a":{"command":["true"]},"b":{"command":"a","depends_on":["a"]}}}`)
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
		if _, err := definition.ReadStored(text); err == nil {
			t.Errorf("ReadStored(%s): no error", text)
		}
	}
}

// TestStoredDependentsIndexed: asked about many activities, a Stored
// indexes its entries by their depends_on, and answers as it did by
// scanning: for each activity, the entries whose depends_on names it,
// however the name is written; an entry whose depends_on cannot be read
// is an error for every activity it could name.
func TestStoredDependentsIndexed(t *testing.T) {
	text := `{"name":"w","activities":{"r":{"command":["true"]},"a":{"command":["true"],"depends_on":["r"]},` +
		`"b":{"command":["true"],"depends_on":["\u0072"]},"c":{"command":["true"],"depends_on":["a","b"]},` +
		`"d":{"command":["true"],"depends_on":["c"]},"e.1":{"command":["true"],"depends_on":["r"]},` +
		`"f":{"command":["true"],"depends_on":["r","e\u002e1"]},"g":{"command":["true"],"depends_on":["f","d"]}}}`
	want := map[string][]string{"r": {"a", "b", "e.1", "f"}, "a": {"c"}, "b": {"c"}, "c": {"d"}, "d": {"g"}, "e.1": {"f"}, "f": {"g"}, "g": nil}
	s, err := definition.ReadStored(text)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 { // the first calls scan, the later ones use the index
		for name, w := range want {
			got, err := s.Dependents(name)
			if err != nil || !reflect.DeepEqual(got, w) {
				t.Errorf("round %d: Dependents(%q) = %q, %v; want %q", round, name, got, err, w)
			}
		}
	}

	bad := `{"name":"w","activities":{"r":{"command":["true"]},"x":{"command":["true"]},"a":{"command":["true"],"depends_on":["r"]},` +
		`"e":{"command":["true"],"depends_on":"r"}}}`
	s, err = definition.ReadStored(bad)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if _, err := s.Dependents("r"); err == nil {
			t.Errorf("round %d: Dependents(r) ignored an entry whose depends_on is not a list", round)
		}
		if got, err := s.Dependents("x"); err != nil || got != nil {
			t.Errorf("round %d: Dependents(x) = %q, %v; want none", round, got, err)
		}
	}
}
