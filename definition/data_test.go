package definition_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/definition"
)

const withParams = `name: w
params:
  date: {required: true, description: "the day"}
  base: {default: "0"}
  max-rows:
activities:
  a:
    command: ["sh", "-c", "echo {{ params.date }} > \"$WHIMBREL_OUTPUT\""]
  b:
    depends_on: [a]
    env:
      N: "{{ outputs.a.n }}"
    command: ["echo", "{{params.base}}", "{{ outputs.a.files.0 }}", "{{ \"{{\" }}"]
`

func TestDefinitionChecksParamsAndTemplates(t *testing.T) {
	if _, err := definition.Parse("ok.yaml", []byte(withParams)); err != nil {
		t.Fatalf("a correct definition is refused: %v", err)
	}
	tests := []struct {
		name, yaml string
		want       []string // every one in the one error
	}{
		{"undeclared param and non-upstream output", `name: w
params: {p: {}}
activities:
  a: {command: [echo]}
  b: {command: ["echo", "{{ params.q }}", "{{ outputs.a.n }}"]}
`, []string{`activity "b": command[1]: {{ params.q }} names a parameter the workflow does not declare`,
			`activity "b": command[2]: {{ outputs.a.n }} names "a", which is not in its depends_on`}},
		{"malformed templates", `name: w
activities:
  a: {command: ["echo", "{{ params }}", "{{ outputs.a }}", "{{ x }}", "{{ params.p"], env: {E: "{{ nope.x }}"}}
`, []string{`command[1]: "{{ params }}": {{ params }} names no parameter`,
			`command[2]: "{{ outputs.a }}": {{ outputs.a }} names no key of an output`,
			`command[3]: "{{ x }}": {{ x }} is not a reference`,
			`command[4]: "{{ params.p" opens {{ without closing it`,
			`env E: "{{ nope.x }}": {{ nope.x }} is not a reference`}},
		{"a template in defaults' env names what an activity cannot read", `name: w
defaults: {env: {E: "{{ outputs.up.k }}"}}
activities:
  up: {command: [echo]}
  down: {command: [echo], depends_on: [up]}
`, []string{`activity "up": env E: {{ outputs.up.k }} names "up", which is not in its depends_on`}},
		{"param declarations", `name: w
params:
  "9x": {}
  a-b: {}
  a_b: {}
  r: {required: true, default: "1"}
  s: {required: yes please}
  t: {defualt: "1"}
  u: [1]
activities:
  a: {command: [echo]}
`, []string{`unknown field "defualt" (did you mean "default"?)`, `required must be true or false`,
			`param "u" must be a mapping of fields`}},
		{"param names", `name: w
params:
  "9x": {}
  a-b: {}
  a_b: {}
  r: {required: true, default: "1"}
activities:
  a: {command: [echo]}
`, []string{`param "9x": a name starts with a letter or _`, `params "a-b" and "a_b" would both be WHIMBREL_PARAM_A_B`,
			`param "r" is required and has a default`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := definition.Parse("w.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestBind(t *testing.T) {
	d, err := definition.Parse("ok.yaml", []byte(withParams))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Bind(map[string]string{"date": "2024-01-31", "max-rows": "5"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"base":"0","date":"2024-01-31","max-rows":"5"}`; definition.EncodeParams(got) != want {
		t.Errorf("bound %s, want %s", definition.EncodeParams(got), want)
	}
	got, err = d.Bind(map[string]string{"date": "d"})
	if err != nil || len(got) != 2 {
		t.Errorf("an optional param without a default: got %v, %v; want it absent", got, err)
	}
	_, err = d.Bind(map[string]string{"bse": "1", "zzz": "2"})
	for _, w := range []string{`param "bse" is not declared by workflow w (did you mean "base"?)`,
		`param "zzz" is not declared by workflow w (it declares: base, date, max-rows)`,
		`param "date" is required: the day (give it with --param date=VALUE)`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q:\n%v", w, err)
		}
	}
	if definition.ParamEnv("max-rows") != "WHIMBREL_PARAM_MAX_ROWS" || definition.ParamEnv("dé.x") != "WHIMBREL_PARAM_D__X" {
		t.Errorf("ParamEnv: %s, %s", definition.ParamEnv("max-rows"), definition.ParamEnv("dé.x"))
	}
}

func TestParseParams(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, []byte(`{"date": "2024-01-31", "n": 1.50, "on": true, "list": "a,b"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := definition.ParseParams([]string{"on=false", "eq=a=b", "empty="}, file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"date": "2024-01-31", "n": "1.50", "on": "false", "list": "a,b", "eq": "a=b", "empty": ""}
	if definition.EncodeParams(got) != definition.EncodeParams(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	_, err = definition.ParseParams([]string{"noequals", "=v", "a=1", "a=2"}, "")
	for _, w := range []string{`--param "noequals": write it as KEY=VALUE`, `--param "=v"`, `--param a is given twice`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q:\n%v", w, err)
		}
	}
	for _, bad := range []string{`[1]`, `null`, `{"a": {"b": 1}, "c": [1], "d": null}`, `{"a": "1"} {}`, `{"a": "1"} ]`, `{`} {
		if _, err := definition.DecodeParams([]byte(bad)); err == nil {
			t.Errorf("DecodeParams(%s) accepted", bad)
		}
	}
	_, err = definition.DecodeParams([]byte(`{"a": {"b": 1}, "c": [1], "d": null}`))
	if err == nil || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), `"c"`) || !strings.Contains(err.Error(), `"d"`) {
		t.Errorf("every bad key should be named: %v", err)
	}
}

func TestResolve(t *testing.T) {
	dt := definition.Data{
		Params: map[string]string{"base": "1", "empty": ""},
		Outputs: map[string]json.RawMessage{
			"a": json.RawMessage(`{"n": 41, "big": 12345678901234567890, "f": 1.5e3, "s": "x y", "ok": true, "nil": null,
				"files": ["s3://b/1", "s3://b/2"], "obj": {"k": [1, {"z": "deep"}]}}`),
		},
	}
	tests := []struct{ in, want, err string }{
		{"plain", "plain", ""},
		{"{{ params.base }}", "1", ""},
		{"{{params.base}}+{{ params.empty }}.", "1+.", ""},
		{"{{ outputs.a.n }}", "41", ""},
		{"{{ outputs.a.big }}", "12345678901234567890", ""},
		{"{{ outputs.a.f }}", "1.5e3", ""},
		{"{{ outputs.a.s }}", "x y", ""},
		{"{{ outputs.a.ok }}", "true", ""},
		{"{{ outputs.a.files.1 }}", "s3://b/2", ""},
		{"{{ outputs.a.files }}", `["s3://b/1","s3://b/2"]`, ""},
		{"{{ outputs.a.obj.k.1.z }}", "deep", ""},
		{`{{ "{{" }} params.base }}`, "{{ params.base }}", ""},
		{"}} alone", "}} alone", ""},
		{"{{ params.nope }}", "", `{{ params.nope }}: the execution has no parameter "nope"`},
		{"{{ outputs.a.m }}", "", "outputs.a.m is absent (keys there: big, f, files, n, nil, obj, ok, s)"},
		{"{{ outputs.a.nil }}", "", "the value is null"},
		{"{{ outputs.a.files.2 }}", "", `"2" is not an index of a list of 2`},
		{"{{ outputs.a.n.x }}", "", "outputs.a.n.x: the value before it is not an object or a list"},
		{"{{ outputs.b.n }}", "", `activity "b" recorded no output`},
		{"{{ params.base", "", "opens {{ without closing it"},
	}
	for _, tc := range tests {
		got, err := dt.Resolve(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("Resolve(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}
