package definition_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
)

// FuzzReadStored: a stored definition comes from a table, so any text
// may be one. Reading it entry by entry never panics, and where the whole
// definition parses, each entry reads as the whole parse has it: the same
// settings and the same dependents.
func FuzzReadStored(f *testing.F) {
	files, _ := filepath.Glob("../examples/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if d, err := definition.Parse(p, b); err == nil {
			f.Add(d.JSON())
		}
	}
	f.Add(`{"name":"w","activities":{"a":{"command":["true"]},"b":{"command":["true"],"depends_on":["a"]}}}`)
	f.Add(`{"name":"w","activities":{"a":null,"b":{"depends_on":["a\u0022"]}}}`)
	f.Add(`{"name":"w","activities":{"a\\"":{"command":["true"]}}}`)
	// More activities than Dependents scans for before it indexes them,
	// with escaped names, a name given twice and an entry whose depends_on
	// is not a list of names.
	f.Add(`{"name":"w","activities":{"r":{"command":["true"]},"a":{"command":["true"],"depends_on":["r"]},` +
		`"b":{"command":["true"],"depends_on":["\u0072"]},"c":{"command":["true"],"depends_on":["a","b","a"]},` +
		`"d":{"command":["true"],"depends_on":["c"],"Depends_On":["r"]},"e":{"command":["true"],"depends_on":"r"},` +
		`"f":{"command":["true"],"depends_on":["r","e"]},"g":{"command":["true"],"depends_on":["f"]}}}`)
	// An entry that cannot be read, whose text names another activity
	// outside its depends_on: an error for that one too, indexed or not.
	f.Add(`{"name":"w","activities":{"r":{"command":["true"]},"a":{"command":["true"]},"x":{"command":"r","depends_on":["a"]}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := definition.ReadStored(s)
		if err != nil {
			return
		}
		var doc struct {
			Activities map[string]json.RawMessage `json:"activities"`
		}
		_ = json.Unmarshal([]byte(s), &doc)
		for name := range doc.Activities {
			_, _ = st.Activity(name)
			_, _ = st.Effective(name)
			_, _ = st.Dependents(name)
		}
		_, _ = st.Activity("no such activity")
		_, _ = st.Dependents("no such activity")
		// Past its first calls a Stored answers from its index: as a
		// fresh one, which scans, does.
		for range 5 {
			_, _ = st.Dependents("no such activity")
		}
		i := 0
		for name := range doc.Activities {
			i++
			fresh, err := definition.ReadStored(s + strings.Repeat(" ", i))
			if err != nil {
				t.Fatalf("the text read, with a space more it does not: %v", err)
			}
			want, werr := fresh.Dependents(name)
			got, gerr := st.Dependents(name)
			if (werr != nil) != (gerr != nil) || !slices.Equal(got, want) {
				t.Errorf("%q: indexed %q, %v; scanned %q, %v", name, got, gerr, want, werr)
			}
		}
		full, err := definition.FromJSON(s)
		if err != nil {
			return
		}
		for _, name := range full.Names() {
			got, err := st.Effective(name)
			if err != nil {
				t.Fatalf("%s: the whole definition parses, its entry does not: %v", name, err)
			}
			if want := full.Effective(name); !settingsEqual(got, want) {
				t.Errorf("%s: entry reads as %+v, the whole definition as %+v", name, got, want)
			}
			deps, err := st.Dependents(name)
			if err != nil {
				t.Fatalf("%s: dependents: %v", name, err)
			}
			var want []string
			for _, other := range full.Names() {
				if slices.Contains(full.Activities[other].DependsOn, name) {
					want = append(want, other)
				}
			}
			slices.Sort(deps)
			slices.Sort(want)
			if !slices.Equal(deps, want) {
				t.Errorf("%s: dependents %v, the whole definition's %v", name, deps, want)
			}
		}
	})
}

func settingsEqual(a, b definition.Settings) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
