package workflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/workflow"
)

// FuzzParse: no input makes the parser panic, and whatever it accepts
// survives the round trip through the stored form unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../examples/*.yaml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(minimal))
	f.Add([]byte("name: w\nx-a: &a {command: [true]}\nactivities:\n  a: *a\n  b: {<<: *a, depends_on: [a]}\n"))
	f.Add([]byte("name: w\nactivities:\n  a: {command: [true], depends_on: [a]}\n"))
	// Found by fuzzing: a merge key including its own mapping overflowed
	// the stack.
	f.Add([]byte("name: w\nactivities:\n  a: &a {command: [true], <<: *a}\n"))
	f.Add([]byte("name: w\nactivities: &x\n  a: *x\n"))
	f.Add([]byte("a: &a [*a, *a, *a]\n"))
	f.Add([]byte("{\"name\": \"w\", \"activities\": {\"a\": {\"command\": [\"true\"], \"timeout\": \"1d\"}}}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		type res struct {
			d   *workflow.Definition
			err error
		}
		c := make(chan res, 1)
		go func() { d, err := workflow.Parse("fuzz.yaml", b); c <- res{d, err} }()
		var r res
		select {
		case r = <-c:
		case <-time.After(2 * time.Second):
			t.Fatalf("slow input: %q", b)
		}
		d, err := r.d, r.err
		if err != nil {
			return
		}
		stored := d.JSON()
		back, err := workflow.ParseStored(stored)
		if err != nil {
			t.Fatalf("an accepted definition does not read back: %v\n%s", err, stored)
		}
		if back.JSON() != stored {
			t.Fatalf("round trip changed it:\n%s\n%s", stored, back.JSON())
		}
		_ = d.Names()
		for n := range d.Activities {
			_ = d.Effective(n)
		}
	})
}

// FuzzTemplate: any text either resolves or is refused with an error,
// never a panic, and a text without {{ is left as it is.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"plain", "{{ params.a }}", "{{ outputs.u.k.0.z }}", `{{ "{{" }}`, "{{", "}}", "{{ outputs..x }}", "{{{{ params.a }}}}"} {
		f.Add(s, `{"k": [{"z": 1}], "s": "v"}`)
	}
	f.Fuzz(func(t *testing.T, s, output string) {
		dt := workflow.Data{Params: map[string]string{"a": "1"}, Outputs: map[string]json.RawMessage{"u": json.RawMessage(output)}}
		got, err := dt.Resolve(s)
		if !strings.Contains(s, "{{") && (err != nil || got != s) {
			t.Fatalf("Resolve(%q) = %q, %v; a text without {{ is its own value", s, got, err)
		}
		if _, rerr := workflow.Refs(s); (rerr == nil) != (err == nil) && rerr != nil {
			t.Fatalf("Refs refused %q (%v) but Resolve did not", s, rerr)
		}
	})
}

// FuzzParams: a params file either decodes to text values that encode and
// decode back the same, or is refused.
func FuzzParams(f *testing.F) {
	for _, s := range []string{`{"a": "1", "b": 2, "c": true}`, `{"a": null}`, `[]`, `{"a": 1e999}`, `{"\u0000": "x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := workflow.DecodeParams(b)
		if err != nil {
			return
		}
		back, err := workflow.StoredParams(workflow.EncodeParams(m))
		if err != nil || workflow.EncodeParams(back) != workflow.EncodeParams(m) {
			t.Fatalf("%q: stored params do not read back: %v", b, err)
		}
	})
}
