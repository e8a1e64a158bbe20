package wrapper

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
)

func TestCompactOutput(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"", "", ""},
		{" \n", "", ""},
		{"{ \"n\" : 41 }\n", `{"n":41}`, ""},
		{`{"s": "` + strings.Repeat("a", state.MaxOutput-8) + `"}`, `{"s":"` + strings.Repeat("a", state.MaxOutput-8) + `"}`, ""},
		{`{"s": "` + strings.Repeat("a", state.MaxOutput-7) + `"}`, "", "is 32769 bytes of compact JSON; an output may be at most 32768 bytes (32 KiB)"},
		{`[1, 2]`, "", "holds JSON that is not an object"},
		{`"x"`, "", "holds JSON that is not an object"},
		{`{"n": `, "", "is not JSON"},
		{`{} {}`, "", "is not JSON"},
		{"{\"s\": \"\xff\"}", "", "is not UTF-8"},
	}
	for _, tc := range tests {
		got, err := compactOutput("/d/output.json", []byte(tc.in))
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("compactOutput(%.40q) = %.40q, %v; want %.40q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "output file /d/output.json (WHIMBREL_OUTPUT)")):
			t.Errorf("compactOutput(%.40q) = %v; want an error naming the file with %q", tc.in, err, tc.err)
		}
	}
}

// FuzzOutput: whatever a command writes, the wrapper either records a
// compact JSON object within the limit or refuses it with a DataError;
// it never panics.
func FuzzOutput(f *testing.F) {
	for _, s := range []string{`{"n": 41}`, `[1]`, `{"a": {"b": [1, 2, {"c": null}]}}`, "", `{"\ud800": 1}`, "{\"s\": \"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := compactOutput("out.json", b)
		if err != nil {
			if _, ok := err.(*DataError); !ok {
				t.Fatalf("error %T, want *DataError", err)
			}
			return
		}
		if got == "" {
			return
		}
		var m map[string]any
		if len(got) > state.MaxOutput || json.Unmarshal([]byte(got), &m) != nil || m == nil {
			t.Fatalf("recorded %q: not a JSON object within the limit", got)
		}
	})
}
