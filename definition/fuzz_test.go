package definition_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
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
	f.Add([]byte(typedParams))
	f.Add([]byte("name: w\nparams: {p: {type: int, enum: [\"1\"], pattern: \"[0-9(\", default: \"1\"}}\nactivities:\n  a: {command: [sh, -c, \"echo {{ params.p | shquote }} '{{ params.p }}'\"]}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		type res struct {
			d   *definition.Workflow
			err error
		}
		c := make(chan res, 1)
		go func() { d, err := definition.Parse("fuzz.yaml", b); c <- res{d, err} }()
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
		back, err := definition.FromJSON(stored)
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
	for _, s := range []string{"plain", "{{ params.a }}", "{{ outputs.u.k.0.z }}", `{{ "{{" }}`, "{{", "}}", "{{ outputs..x }}", "{{{{ params.a }}}}",
		"{{ params.a | shquote }}", "{{ outputs.u.s|shquote|shquote }}", "{{ params.a | }}", "{{ params.a | upper }}", "{{ | shquote }}", "{{ params.a || shquote }}"} {
		f.Add(s, `{"k": [{"z": 1}], "s": "v"}`)
	}
	f.Add("sh {{ outputs.u.s | shquote }}", `{"s": "1 )); echo INJECTED; echo $(( 1"}`)
	f.Fuzz(func(t *testing.T, s, output string) {
		dt := definition.Data{Params: map[string]string{"a": "1"}, Outputs: map[string]json.RawMessage{"u": json.RawMessage(output)}}
		got, err := dt.Resolve(s)
		if !strings.Contains(s, "{{") && (err != nil || got != s) {
			t.Fatalf("Resolve(%q) = %q, %v; a text without {{ is its own value", s, got, err)
		}
		refs, rerr := definition.Refs(s)
		if (rerr == nil) != (err == nil) && rerr != nil {
			t.Fatalf("Refs refused %q (%v) but Resolve did not", s, rerr)
		}
		for _, r := range refs {
			for _, f := range r.Filters {
				if f != definition.FilterShquote {
					t.Fatalf("Refs(%q) accepted filter %q", s, f)
				}
			}
		}
		// Any text, as a parameter, is one shell word through shquote.
		dt.Params["a"] = output
		q, err := dt.Resolve("{{ params.a | shquote }}")
		if strings.ContainsRune(output, 0) != (err != nil) {
			t.Fatalf("shquote of %q: %v; want an error exactly when it holds a NUL", output, err)
		}
		if err == nil {
			if words, ok := shellWords(q); !ok || len(words) != 1 || words[0] != output {
				t.Fatalf("shquote of %q is %q, which a shell reads as %q (plain: %v); want the one word", output, q, words, ok)
			}
		}
	})
}

// FuzzShquote: whatever the value, shquote makes it one shell word that a
// real shell prints back unchanged.
func FuzzShquote(f *testing.F) {
	for _, v := range hostileValues {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		q, err := definition.Shquote(v)
		if strings.ContainsRune(v, 0) {
			if err == nil {
				t.Fatalf("Shquote(%q) = %q; a NUL byte must be refused", v, q)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if words, ok := shellWords(q); !ok || len(words) != 1 || words[0] != v {
			t.Fatalf("Shquote(%q) = %q, which a shell reads as %q (plain: %v)", v, q, words, ok)
		}
		if got := echoThroughShell(t, "sh", "printf '[%s]' "+q+" x"); got != "["+v+"][x]" {
			t.Fatalf("sh -c \"printf '[%%s]' %s x\" printed %q, want %q", q, got, "["+v+"][x]")
		}
	})
}

// shellWords splits s as a POSIX shell splits a simple command's words:
// blanks separate them; single quotes keep everything; double quotes
// keep all but \ before $ ` " \ and newline; a backslash outside quotes
// keeps the next byte. ok is false if s holds anything a shell would
// interpret (an operator, an expansion, a glob, a comment, unclosed quotes).
func shellWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return words, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			for i++; ; i++ {
				if i >= len(s) {
					return words, false
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '$' || s[i] == '`' {
					return words, false
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return words, false
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		case strings.IndexByte(";&|<>()$`*?[#~=%{}!", c) >= 0:
			return words, false
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}

// FuzzParams: a params file either decodes to text values that encode and
// decode back the same, or is refused.
func FuzzParams(f *testing.F) {
	for _, s := range []string{`{"a": "1", "b": 2, "c": true}`, `{"a": null}`, `[]`, `{"a": 1e999}`, `{"\u0000": "x"}`} {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"base": "2 )); echo INJECTED; echo $(( 3"}`, `{"base": 42, "ratio": 1e3, "dry": false, "day": "2024-02-29"}`,
		`{"base": "-0", "ratio": "-0.0e-0", "day": "0000-01-01", "region": "eu"}`, `{"base": 9223372036854775808}`} {
		f.Add([]byte(s))
	}
	typed, err := definition.Parse("typed.yaml", []byte(typedParams))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := definition.DecodeParams(b)
		if err != nil {
			return
		}
		back, err := definition.StoredParams(definition.EncodeParams(m))
		if err != nil || definition.EncodeParams(back) != definition.EncodeParams(m) {
			t.Fatalf("%q: stored params do not read back: %v", b, err)
		}
		// Every value, given to every typed param: what Bind accepts is
		// a value of the type, by an oracle of its own.
		for _, v := range m {
			for name, ok := range map[string]func(string) bool{
				"base": func(v string) bool {
					n, err := strconv.ParseInt(v, 10, 64)
					return err == nil && strconv.FormatInt(n, 10) == strings.Replace(v, "-0", "0", 1)
				},
				"ratio": func(v string) bool {
					f, err := strconv.ParseFloat(v, 64)
					return err == nil && !math.IsInf(f, 0) && json.Valid([]byte(v)) && !strings.ContainsAny(v, " \t\n\r")
				},
				"dry": func(v string) bool { return v == "true" || v == "false" },
				"day": func(v string) bool {
					d, err := time.Parse(time.DateOnly, v)
					return err == nil && d.Format(time.DateOnly) == v
				},
				"region":   func(v string) bool { return v == "eu" || v == "us" },
				"table":    func(v string) bool { return v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyz_0123456789") == "" },
				"anything": func(string) bool { return true },
			} {
				_, err := typed.Bind(map[string]string{name: v})
				if (err == nil) != ok(v) {
					t.Fatalf("Bind(%s=%q): %v; the oracle says accepted=%v", name, v, err, ok(v))
				}
				if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("param %q: %s", name, strconv.Quote(v)[:min(len(strconv.Quote(v)), 20)])) {
					t.Fatalf("Bind(%s=%q): %v; want the param and the value named", name, v, err)
				}
			}
		}
	})
}
