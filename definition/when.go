package definition

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"
)

// Control flow (docs/control-flow.md): an activity's when, its
// trigger_rule, and the workflow's finally activities. The expressions
// are expr-lang/expr's language, sandboxed (no calls into Go beyond its
// builtins), compiled and type-checked when the definition is read, so a
// mistake is reported before anything is written.

// The trigger rules, with Airflow's names: which endings of an activity's
// upstreams let it run. Each is judged once every upstream is final.
const (
	// RuleAllSuccess: every upstream completed or was skipped (the default).
	RuleAllSuccess = "all_success"
	// RuleAllDone: every upstream ended, however.
	RuleAllDone = "all_done"
	// RuleAllFailed: every upstream failed, timed out, or was cancelled
	// because one of its own upstreams did not complete.
	RuleAllFailed = "all_failed"
	// RuleOneFailed: at least one upstream failed or timed out.
	RuleOneFailed = "one_failed"
	// RuleOneSuccess: at least one upstream completed (not skipped).
	RuleOneSuccess = "one_success"
	// RuleNoneFailed: no upstream failed, timed out or was cancelled;
	// skipped ones count as satisfied.
	RuleNoneFailed = "none_failed"
)

// TriggerRules lists the trigger rules.
var TriggerRules = []string{RuleAllSuccess, RuleAllDone, RuleAllFailed, RuleOneFailed, RuleOneSuccess, RuleNoneFailed}

// Rule is the activity's trigger rule, all_success when it gives none.
func (a *Activity) Rule() string {
	if a == nil || a.TriggerRule == "" {
		return RuleAllSuccess
	}
	return a.TriggerRule
}

// Handles reports whether the activity runs on a failure of an upstream,
// so that the failure does not decide the workflow's outcome.
func (a *Activity) Handles() bool {
	switch a.Rule() {
	case RuleOneFailed, RuleAllFailed, RuleAllDone:
		return true
	}
	return false
}

// WhenEnv is what a when expression reads: the execution's parameters,
// the outputs of the activity's direct upstreams (a skipped upstream's is
// absent), the workflow's name and id, and the element of a map and its
// index (both nil outside one).
type WhenEnv struct {
	Params    map[string]string `expr:"params"`
	Outputs   map[string]any    `expr:"outputs"`
	Workflow  map[string]string `expr:"workflow"`
	Item      any               `expr:"item"`
	ItemIndex any               `expr:"item_index"`
}

// vars is the environment as an expression reads it: a struct, so that
// item and item_index are declared of any type (a nil in a map would
// declare them nil, and refuse item % 2), with no map left nil.
func (e WhenEnv) vars() WhenEnv {
	if e.Params == nil {
		e.Params = map[string]string{}
	}
	if e.Outputs == nil {
		e.Outputs = map[string]any{}
	}
	if e.Workflow == nil {
		e.Workflow = map[string]string{}
	}
	return e
}

// compileWhen compiles a when expression and checks it: a syntax error, a
// name other than params, outputs, workflow, item and item_index, a parameter not
// declared, an output of an activity not in depends_on, or a result that
// is not a boolean is an error.
func compileWhen(src string, declared func(string) bool, upstreams []string) (*vm.Program, error) {
	names := &nameCheck{declared: declared, upstreams: upstreams}
	prog, err := expr.Compile(src, expr.Env(WhenEnv{}.vars()), expr.AsBool(), expr.Patch(names))
	if err != nil {
		// The library's message carries a caret drawing over several
		// lines; its first line says what is wrong.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return nil, fmt.Errorf("%s", msg)
	}
	if len(names.problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(names.problems, "; "))
	}
	return prog, nil
}

// nameCheck finds references to parameters that are not declared and to
// outputs of activities that are not direct upstreams.
type nameCheck struct {
	declared  func(string) bool
	upstreams []string
	problems  []string
}

func (c *nameCheck) Visit(node *ast.Node) {
	m, ok := (*node).(*ast.MemberNode)
	if !ok {
		return
	}
	id, ok := m.Node.(*ast.IdentifierNode)
	if !ok {
		return
	}
	key, ok := m.Property.(*ast.StringNode)
	if !ok {
		return
	}
	switch id.Value {
	case "params":
		if c.declared != nil && !c.declared(key.Value) {
			c.problems = append(c.problems, fmt.Sprintf("params.%s names a parameter the workflow does not declare under `params:`", key.Value))
		}
	case "outputs":
		if !slices.Contains(c.upstreams, key.Value) {
			c.problems = append(c.problems, fmt.Sprintf("outputs.%s names %q, which is not in its depends_on: only direct upstream outputs can be read", key.Value, key.Value))
		}
	case "workflow":
		if key.Value != "name" && key.Value != "id" {
			c.problems = append(c.problems, fmt.Sprintf("workflow.%s is not known: use workflow.name or workflow.id", key.Value))
		}
	}
}

// EvalWhen evaluates an activity's when expression. An error (a missing
// key, a value of the wrong type) names the expression.
func EvalWhen(src string, env WhenEnv) (bool, error) {
	prog, err := expr.Compile(src, expr.Env(WhenEnv{}.vars()), expr.AsBool())
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return false, fmt.Errorf("when %q: %s", src, msg)
	}
	out, err := expr.Run(prog, env.vars())
	if err != nil {
		msg, _, _ := strings.Cut(err.Error(), "\n")
		return false, fmt.Errorf("when %q: %s", src, msg)
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("when %q: gave %T, not a boolean", src, out)
	}
	return b, nil
}

// workflowRef reads {{ workflow.KEY }}: the execution's name or id, or,
// in a finally activity, the state the workflow ended in.
func workflowRef(parts []string) (*Ref, error) {
	if len(parts) == 2 && slices.Contains([]string{"name", "id", "state"}, parts[1]) {
		return &Ref{Kind: "workflow", Path: parts[1:]}, nil
	}
	return nil, fmt.Errorf("is not a reference: use {{ workflow.name }}, {{ workflow.id }} or, in a finally activity, {{ workflow.state }}")
}

// checkControl checks the control flow of a definition: each activity's
// when and trigger_rule, and the finally activities, which may wait only
// on one another.
func (d *Workflow) checkControl(p *problems) {
	declared := func(n string) bool { _, ok := d.Params[n]; return ok }
	check := func(kind string, acts map[string]*Activity) {
		names := make([]string, 0, len(acts))
		for n := range acts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			a := acts[n]
			if a == nil {
				continue
			}
			line := p.pos.activityLine(n)
			if a.TriggerRule != "" && !slices.Contains(TriggerRules, a.TriggerRule) {
				msg := fmt.Sprintf("%s %q: trigger_rule %q is not known (known: %s)", kind, n, a.TriggerRule, strings.Join(TriggerRules, ", "))
				if s := suggest(a.TriggerRule, TriggerRules); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				p.add(line, "%s", msg)
			}
			if strings.TrimSpace(a.When) == "" {
				if a.When != "" {
					p.add(line, "%s %q: when is empty: give an expression, such as \"params.mode != 'dry-run'\", or remove it", kind, n)
				}
				continue
			}
			wl := line
			if p.pos != nil && p.pos.when[n] > 0 {
				wl = p.pos.when[n]
			}
			if _, err := compileWhen(a.When, declared, a.DependsOn); err != nil {
				p.add(wl, "%s %q: when %q: %v", kind, n, a.When, err)
			} else if a.ForEach == nil && a.WhenPerElement() {
				p.add(wl, "%s %q: when %q reads item or item_index, which only the elements of a for_each activity have: add for_each, or remove them from the expression", kind, n, a.When)
			}
		}
	}
	check("activity", d.Activities)
	if len(d.Finally) == 0 {
		return
	}
	check("finally activity", d.Finally)
	names := make([]string, 0, len(d.Finally))
	for n := range d.Finally {
		names = append(names, n)
	}
	sort.Strings(names)
	// A finally activity is checked as an activity of a workflow made of
	// the finally activities: it may wait only on one of them.
	fin := *d
	fin.Activities = d.Finally // and Finally stays: its templates may read workflow.state
	for _, n := range names {
		line := p.pos.activityLine(n)
		if d.Activities[n] != nil {
			p.add(line, "finally activity %q has the name of an activity of the workflow: give it another", n)
			continue
		}
		a := d.Finally[n]
		if a != nil {
			var main []string
			for _, up := range a.DependsOn {
				if d.Activities[up] != nil {
					main = append(main, up)
				}
			}
			if len(main) > 0 {
				p.add(line, "finally activity %q depends on %s, of the workflow's activities: a finally activity runs once the workflow has ended, and may wait only on other finally activities", n, strings.Join(main, ", "))
				continue
			}
		}
		fin.checkActivity(p, n, line, names, func(up string) bool { return d.Finally[up] != nil })
	}
	if p.err() == nil {
		if cycle := fin.cycle(names); cycle != nil {
			p.add(p.pos.activityLine(cycle[0]), "the finally activities form a cycle: %s", strings.Join(cycle, " → "))
		}
	}
}

// Controlled reports whether the definition uses control flow: a when, a
// trigger rule other than the default, or finally activities.
func (d *Workflow) Controlled() bool {
	if len(d.Finally) > 0 {
		return true
	}
	for _, a := range d.Activities {
		if a != nil && (a.When != "" || a.Rule() != RuleAllSuccess) {
			return true
		}
	}
	return false
}

// FinallyNames lists the finally activities, those that wait on nothing
// first, then by name.
func (d *Workflow) FinallyNames() []string {
	fin := Workflow{Activities: d.Finally}
	return fin.Names()
}

// Lookup returns the named activity, or finally activity, or nil.
func (d *Workflow) Lookup(name string) *Activity {
	if a := d.Activities[name]; a != nil {
		return a
	}
	return d.Finally[name]
}
