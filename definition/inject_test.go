package definition_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
)

// The values an attacker would give: each breaks out of a naive paste
// into a shell script in its own way.
var hostileValues = []string{
	"", "plain", "a b", "it's", "''", `"`, `"$HOME"`, "$(echo INJECTED)", "`echo INJECTED`",
	`\`, `\'`, "a\nb\n", "2 )); echo INJECTED; echo $(( 3", "1 )); echo INJECTED; echo $(( 1",
	"-n", "*", "~", "; echo INJECTED", "' ; echo INJECTED ; '", "\xff\xfe not UTF-8", "\x1b[31mred",
	"${IFS}", "!!", "a'\"'\"'b",
}

// shells finds the POSIX shells on this machine; sh at least.
func shells(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, sh := range []string{"sh", "bash", "dash", "zsh", "busybox"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no sh on PATH")
	}
	return out
}

// echoThroughShell runs script under sh -c and returns what it printed.
func echoThroughShell(t *testing.T, sh, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"-c", script}
	if strings.HasSuffix(sh, "busybox") {
		args = append([]string{"sh"}, args...)
	}
	out, err := exec.CommandContext(ctx, sh, args...).Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", sh, script, err)
	}
	return string(out)
}

// TestShquoteIsOneWord: whatever the value, a shell given `printf %s
// VALUE|shquote` prints the value exactly: one word, nothing run.
func TestShquoteIsOneWord(t *testing.T) {
	t.Parallel()
	for _, sh := range shells(t) {
		for _, v := range hostileValues {
			q, err := definition.Shquote(v)
			if err != nil {
				t.Fatalf("Shquote(%q): %v", v, err)
			}
			if got := echoThroughShell(t, sh, "printf '[%s]' "+q); got != "["+v+"]" {
				t.Errorf("%s: printf '[%%s]' %s printed %q, want %q", sh, q, got, "["+v+"]")
			}
		}
	}
	if _, err := definition.Shquote("a\x00b"); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("Shquote of a NUL byte: %v; want it refused", err)
	}
}

// TestResolveFilters: shquote applies to a parameter and to any kind of
// output value, and a raw reference is pasted as it is.
func TestResolveFilters(t *testing.T) {
	t.Parallel()
	dt := definition.Data{Params: map[string]string{"base": "2 )); echo x"},
		Outputs: map[string]json.RawMessage{"up": json.RawMessage(`{"n": "it's", "k": 3, "o": {"a": [1]}}`)}}
	for _, tc := range []struct{ tmpl, want string }{
		{"{{ params.base | shquote }}", `'2 )); echo x'`},
		{"{{params.base|shquote}}", `'2 )); echo x'`},
		{"{{ params.base }}", `2 )); echo x`},
		{"{{ outputs.up.n | shquote }}", `'it'\''s'`},
		{"{{ outputs.up.k | shquote }}", `'3'`},
		{"{{ outputs.up.o | shquote }}", `'{"a":[1]}'`},
		{"x={{ outputs.up.n | shquote | shquote }}", `x=''\''it'\''\'\'''\''s'\'''`},
	} {
		got, err := dt.Resolve(tc.tmpl)
		if err != nil || got != tc.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.tmpl, got, err, tc.want)
		}
	}
	dt.Params["base"] = "a\x00b"
	if _, err := dt.Resolve("{{ params.base | shquote }}"); err == nil || !strings.Contains(err.Error(), "{{ params.base | shquote }}: holds a NUL byte") {
		t.Errorf("a NUL byte through shquote: %v; want an error naming the reference", err)
	}
}

// TestFilterErrors: an unknown or empty filter is a definition error with
// the line of the command entry.
func TestFilterErrors(t *testing.T) {
	t.Parallel()
	_, err := definition.Parse("f.yaml", []byte(`name: w
params: {p: {}}
activities:
  a:
    command:
      - echo
      - "{{ params.p | upper }}"
      - "{{ params.p | }}"
`))
	for _, want := range []string{
		`f.yaml:7: activity "a": command[1]: "{{ params.p | upper }}": {{ params.p | upper }} applies filter "upper", which is not known (known: shquote)`,
		`f.yaml:8: activity "a": command[2]: "{{ params.p | }}": {{ params.p | }} has an empty filter`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

const typedParams = `name: typed
params:
  base: {type: int, default: "0"}
  ratio: {type: number}
  dry: {type: bool}
  day: {type: date}
  region: {enum: [eu, us]}
  table: {pattern: "[a-z_0-9]+"}
  size: {type: int, enum: ["1", "2"]}
  anything: {}
activities:
  a: {command: ["true"]}
`

// TestBindChecksTypes: a value its declaration does not accept is refused
// with the param, the value and the rule; every problem in one error.
func TestBindChecksTypes(t *testing.T) {
	t.Parallel()
	d, err := definition.Parse("typed.yaml", []byte(typedParams))
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"base": "-42", "ratio": "1.5e3", "dry": "true", "day": "2024-02-29", "region": "us",
		"table": "rows_2024", "size": "2", "anything": "2 )); echo INJECTED; echo $(( 3"}
	if got, err := d.Bind(good); err != nil || len(got) != len(good) {
		t.Fatalf("Bind(%v) = %v, %v; want every value accepted", good, got, err)
	}
	for _, tc := range []struct{ name, value, want string }{
		{"base", "2 )); echo INJECTED; echo $(( 3", `param "base": "2 )); echo INJECTED; echo $(( 3" is not an int: write a whole number such as 42 or -7`},
		{"base", "010", `is not an int`},
		{"base", "+1", `is not an int`},
		{"base", "1.0", `is not an int`},
		{"base", "99999999999999999999", `is not an int`},
		{"base", "", `is not an int`},
		{"ratio", "NaN", `param "ratio": "NaN" is not a number: write a number as JSON does`},
		{"ratio", "1e999", `is not a number`},
		{"ratio", "0x10", `is not a number`},
		{"ratio", ".5", `is not a number`},
		{"dry", "yes", `param "dry": "yes" is not a bool: write true or false`},
		{"dry", "True", `is not a bool`},
		{"day", "2024-02-30", `param "day": "2024-02-30" is not a date: write a day as YYYY-MM-DD, such as 2024-01-31`},
		{"day", "2024-1-31", `is not a date`},
		{"day", "2024-01-31T00:00:00Z", `is not a date`},
		{"region", "EU", `param "region": "EU" is not one of "eu", "us"`},
		{"table", "rows; drop table x", `param "table": "rows; drop table x" does not match the pattern "[a-z_0-9]+" (the whole value must match)`},
		{"table", "a\nb", `does not match the pattern`},
		{"size", "3", `param "size": "3" is not one of "1", "2"`},
		{"size", "x", `param "size": "x" is not an int`},
	} {
		_, err := d.Bind(map[string]string{tc.name: tc.value})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Bind(%s=%q) = %v; want an error with %q", tc.name, tc.value, err, tc.want)
		}
	}
	_, err = d.Bind(map[string]string{"base": "x", "dry": "no", "nope": "1"})
	for _, want := range []string{`param "base": "x" is not an int`, `param "dry": "no" is not a bool`, `param "nope" is not declared`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("all at once: the error lacks %q:\n%v", want, err)
		}
	}
	// A hostile value is quoted in the error, never printed raw.
	_, err = d.Bind(map[string]string{"base": "\x1b[2J" + strings.Repeat("9", 200)})
	if err == nil || strings.Contains(err.Error(), "\x1b") || strings.Contains(err.Error(), strings.Repeat("9", 100)) {
		t.Errorf("a hostile value's error: %q; want it escaped and shortened", err)
	}
	// The stored definition keeps the declarations.
	back, err := definition.FromJSON(d.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := back.Bind(map[string]string{"base": "x"}); err == nil || !strings.Contains(err.Error(), "is not an int") {
		t.Errorf("the stored definition's Bind: %v; want the type checked", err)
	}
}

// TestParamDeclarationErrors: a declaration that cannot work is refused
// when the definition is read, each problem with its line.
func TestParamDeclarationErrors(t *testing.T) {
	t.Parallel()
	_, err := definition.Parse("p.yaml", []byte(`name: w
params:
  a: {type: integer}
  b:
    pattern: "[a-z"
  c: {type: int, default: "ten"}
  d: {type: bool, enum: ["true", "maybe"]}
  f: {pattern: "[0-9]+", default: "12a"}
  g: {enum: [x, y], default: z}
activities:
  x: {command: ["true"]}
`))
	for _, want := range []string{
		`p.yaml:3: param "a": type "integer" is not known: use string, int, number, bool, date`,
		`p.yaml:5: param "b": pattern "[a-z" is not a regular expression (Go's RE2 syntax): missing closing ]`,
		`p.yaml:6: param "c": default "ten" is not an int`,
		`p.yaml:7: param "d": enum value "maybe" is not a bool`,
		`p.yaml:8: param "f": default "12a" does not match the pattern "[0-9]+"`,
		`p.yaml:9: param "g": default "z" is not one of "x", "y"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	// The kinds of the fields are checked first, as every field's are.
	_, err = definition.Parse("k.yaml", []byte(`name: w
params:
  e: {enum: []}
  h: {type: [int]}
  i: {enum: [a, ~]}
activities:
  x: {command: ["true"]}
`))
	for _, want := range []string{
		`k.yaml:3: param "e": enum must be a list of the values accepted`,
		`k.yaml:4: param "h": type must be text`,
		`k.yaml:5: param "i": enum holds a null or non-text entry`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// TestShellWarnings: a value that may be any text, pasted raw into the
// script of a shell's -c, is warned of with its line and the fix; a
// shquoted one, a typed one, one in env or in the script's operands is
// not. The definition still reads.
func TestShellWarnings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, activity string
		want           []string // each in one warning; none: no warning
	}{
		{"the README's old pattern", `
    depends_on: [up]
    command: ["sh", "-c", "echo $(( {{ outputs.up.n }} + {{ params.base }} ))"]`, []string{
			`w.yaml:11: activity "a": command[2]: {{ outputs.up.n }} is pasted raw into the script of sh -c, where a value runs as shell code: write {{ outputs.up.n | shquote }}, or pass it by environment (env: {N: "{{ outputs.up.n }}"}) and write "$N"`,
			`w.yaml:11: activity "a": command[2]: {{ params.base }} is pasted raw into the script of sh -c, where a value runs as shell code: write {{ params.base | shquote }}, or read it from the environment as "$WHIMBREL_PARAM_BASE"`}},
		{"bash -euc in a block, through env", `
    command:
      - /usr/bin/env
      - bash
      - -euo
      - pipefail
      - -c
      - |
        echo {{ params.region }} {{ params.day }} {{ params.base }}`, []string{
			`w.yaml:16: activity "a": command[5]: {{ params.base }} is pasted raw into the script of bash -c`}},
		{"busybox sh -xc", `
    command: [busybox, sh, -xc, "echo {{ params.base }}"]`, []string{`command[3]: {{ params.base }} is pasted raw into the script of sh -c`}},
		{"inside the script's own quotes", `
    command: ["sh", "-c", "echo \"{{ params.base | shquote }}\" '{{ params.base | shquote }}'"]`, []string{
			`{{ params.base | shquote }} sits inside double quotes in the script of sh -c`,
			`{{ params.base | shquote }} sits inside single quotes in the script of sh -c`}},
		{"shquoted", `
    depends_on: [up]
    command: ["sh", "-c", "echo {{ params.base | shquote }} {{ outputs.up.n | shquote }} \\\"x\\\" {{ params.base | shquote }}"]`, nil},
		{"typed and enum values raw", `
    command: ["sh", "-c", "echo {{ params.day }} {{ params.region }} {{ params.size }}"]`, nil},
		{"operands after the script, env values, no shell", `
    depends_on: [up]
    env: {N: "{{ outputs.up.n }}", B: "{{ params.base }}"}
    command: ["sh", "-c", "echo \"$1\" \"$N\"", "sh", "{{ params.base }}", "{{ outputs.up.n }}"]`, nil},
		{"not a script", `
    command: ["echo", "{{ params.base }}", "-c", "{{ params.base }}"]`, nil},
		{"sh without -c runs a file", `
    command: ["sh", "-e", "script.sh", "{{ params.base }}"]`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			y := `name: w
params:
  base: {}
  day: {type: date}
  region: {enum: [eu, us]}
  size: {type: int}
activities:
  up: {command: ["true"]}
  a:` + tc.activity + "\n"
			d, err := definition.Parse("w.yaml", []byte(y))
			if err != nil {
				t.Fatalf("a definition with warnings is refused: %v", err)
			}
			got := d.Warnings()
			if len(got) != len(tc.want) {
				t.Errorf("%d warnings, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					found = found || strings.Contains(g, w)
				}
				if !found {
					t.Errorf("no warning has %q:\n%s", w, strings.Join(got, "\n"))
				}
			}
		})
	}
}
