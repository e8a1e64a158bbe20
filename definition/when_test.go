package definition

import (
	"strings"
	"testing"
)

// TestControlChecks: every mistake of control flow is reported at its
// line, together with the others; a correct definition passes.
func TestControlChecks(t *testing.T) {
	head := "name: w\nparams:\n  mode: {default: run}\nactivities:\n  a: {command: [\"true\"]}\n"
	tests := []struct {
		name, yaml string
		want       []string // "" for none
	}{
		{"fine", head + "  b:\n    depends_on: [a]\n    when: \"outputs.a.ok && params.mode != 'dry-run' && workflow.name == 'w'\"\n    trigger_rule: one_failed\n    command: [\"true\"]\nfinally:\n  f: {command: [\"echo\", \"{{ workflow.state }}\"]}\n  g: {command: [\"true\"], depends_on: [f]}\n", nil},
		{"syntax", head + "  b:\n    when: \"1 +\"\n    command: [\"true\"]\n", []string{`w.yaml:7: activity "b": when "1 +": unexpected token EOF`}},
		{"not boolean", head + "  b:\n    when: \"params.mode\"\n    command: [\"true\"]\n", []string{`w.yaml:7: activity "b": when "params.mode": expected bool, but got string`}},
		{"unknown name", head + "  b:\n    when: \"mode == 'x'\"\n    command: [\"true\"]\n", []string{`unknown name mode`}},
		{"undeclared param", head + "  b:\n    when: \"params.mdoe == 'x'\"\n    command: [\"true\"]\n", []string{`params.mdoe names a parameter the workflow does not declare`}},
		{"not an upstream", head + "  b:\n    when: \"outputs.a.ok\"\n    command: [\"true\"]\n", []string{`outputs.a names "a", which is not in its depends_on`}},
		{"unknown rule", head + "  b:\n    trigger_rule: all_sucess\n    command: [\"true\"]\n", []string{`w.yaml:6: activity "b": trigger_rule "all_sucess" is not known`, `(did you mean "all_success"?)`}},
		{"finally on main", head + "finally:\n  f: {command: [\"true\"], depends_on: [a]}\n", []string{`w.yaml:7: finally activity "f" depends on a, of the workflow's activities`}},
		{"finally name clash", head + "finally:\n  a: {command: [\"true\"]}\n", []string{`finally activity "a" has the name of an activity of the workflow`}},
		{"finally cycle", head + "finally:\n  f: {command: [\"true\"], depends_on: [g]}\n  g: {command: [\"true\"], depends_on: [f]}\n", []string{`the finally activities form a cycle`}},
		{"state outside finally", head + "  b: {command: [\"echo\", \"{{ workflow.state }}\"]}\n", []string{`{{ workflow.state }} is known only to a finally activity`}},
		{"item in a map", head + "  b:\n    for_each: [1, 2]\n    when: \"item % 2 == 0 && item_index > 0 && params.mode != 'x'\"\n    command: [\"true\"]\n", nil},
		{"item outside a map", head + "  b:\n    when: \"item > 1\"\n    command: [\"true\"]\n", []string{`w.yaml:7: activity "b": when "item > 1" reads item or item_index, which only the elements of a for_each activity have`}},
		{"item_index outside a map", head + "finally:\n  f:\n    when: \"item_index == 0\"\n    command: [\"true\"]\n", []string{`w.yaml:8: finally activity "f": when "item_index == 0" reads item or item_index`}},
		{"all at once", head + "  b:\n    when: \"1 +\"\n    trigger_rule: nope\n    command: [\"true\"]\nfinally:\n  f: {command: [\"true\"], depends_on: [a]}\n", []string{`unexpected token`, `trigger_rule "nope"`, `finally activity "f" depends on a`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(tc.yaml))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("a correct definition: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestEvalWhen: the expression reads params, outputs, workflow and item;
// an error at run time names the expression.
func TestEvalWhen(t *testing.T) {
	env := WhenEnv{Params: map[string]string{"mode": "run"}, Outputs: map[string]any{"check": map[string]any{"changed": true, "n": 3.0}},
		Workflow: map[string]string{"name": "w", "id": "w::1"}}
	for src, want := range map[string]bool{
		"outputs.check.changed && params.mode != 'dry-run'": true,
		"outputs.check.n > 5":                               false,
		"workflow.name == 'w'":                              true,
		"item == nil":                                       true,
	} {
		got, err := EvalWhen(src, env)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", src, got, err, want)
		}
	}
	_, err := EvalWhen("outputs.check.n.deeper > 1", env)
	if err == nil || !strings.Contains(err.Error(), `when "outputs.check.n.deeper > 1"`) {
		t.Errorf("a run-time failure: %v; want an error naming the expression", err)
	}
}
