package jsonobj

import (
	"bytes"
	"encoding/json"
	"testing"
)

var seeds = []string{
	`{}`, `null`, ` { "a" : 1 , "b":[1,{"c":"}"}], "d":"x\"y\\", "e":{"f":{}} } `,
	`{"\u0061":true,"a":false}`, `{"k":-1.5e3,"l":null,"m":"é","n":[]}`,
	"{\"bad\xffkey\":1}", `[1]`, `"s"`, `1`, `{"a":1`, `{"a"`, `{`, ``, `{"a":}`,
	`{"name":"x","activities":{"a":{"command":["true"]}}}`,
}

// FuzzMembers: on a valid JSON object Members finds what encoding/json
// finds; on anything else it may fail, never panic.
func FuzzMembers(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string][]byte{}
		err := Members(b, func(k string, v []byte) { got[k] = v })
		var want map[string]json.RawMessage
		if json.Unmarshal(b, &want) != nil {
			return // not an object (or not JSON): any answer but a panic
		}
		if err != nil {
			t.Fatalf("Members(%q): %v; encoding/json reads it", b, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Members(%q) = %q; encoding/json: %q", b, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("Members(%q)[%q] = %q; encoding/json: %q", b, k, got[k], v)
			}
		}
	})
}

// FuzzElements: on a valid JSON array Elements finds what encoding/json
// finds; on anything else it may fail, never panic.
func FuzzElements(f *testing.F) {
	for _, s := range append(seeds, `[]`, ` [ 1 , "a,]" , [2,[3]] , {"b":[]} , null ] `, `[{"N":"2026"},{"N":"60.5"}]`, `[1,`, `[`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got [][]byte
		err := Elements(b, func(v []byte) { got = append(got, v) })
		var want []json.RawMessage
		if json.Unmarshal(b, &want) != nil {
			return // not an array (or not JSON): any answer but a panic
		}
		if err != nil {
			t.Fatalf("Elements(%q): %v; encoding/json reads it", b, err)
		}
		if len(got) != len(want) {
			t.Fatalf("Elements(%q) = %q; encoding/json: %q", b, got, want)
		}
		for i, v := range want {
			if !bytes.Equal(got[i], v) {
				t.Fatalf("Elements(%q)[%d] = %q; encoding/json: %q", b, i, got[i], v)
			}
		}
	})
}
