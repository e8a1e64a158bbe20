package wrapper

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
)

// An element of a for_each map whose when reads the element (item or
// item_index) is judged here, after its claim and before its command
// starts (docs/for-each.md): a false when records the element COMPLETED
// with skipped and no output, in the one write that would have recorded
// its command's end, so the map counts it as completed; an expression
// that cannot be evaluated fails the element with a reason naming it.

// elementSkipped is what prepare returns for an element whose when is
// false: the command must not start, and the element is skipped.
type elementSkipped struct{ reason string }

func (e *elementSkipped) Error() string { return e.reason }

// elementWhen evaluates the when of the element claimed, with the
// parameters, the outputs of the map's direct upstreams (none from a
// skipped one), the workflow's name and ID, and the element and its index.
func elementWhen(act *definition.Activity, wf *state.WorkflowExec, params map[string]string, ups map[string]*state.ActivityExec, claimed *state.ActivityExec) error {
	if claimed.ItemIndex == nil || !act.WhenPerElement() {
		return nil
	}
	env := definition.WhenEnv{Params: params, Outputs: map[string]any{},
		Workflow: map[string]string{"name": wf.WorkflowName, "id": wf.WorkflowExecID}, ItemIndex: *claimed.ItemIndex}
	for _, name := range act.DependsOn {
		u := ups[name]
		if u == nil || u.State != state.Completed || u.Skipped || u.Output == "" {
			continue
		}
		var v any
		if json.Unmarshal([]byte(u.Output), &v) == nil {
			env.Outputs[name] = v
		}
	}
	if claimed.Item != "" {
		if err := json.Unmarshal([]byte(claimed.Item), &env.Item); err != nil {
			return &DataError{Problems: []string{fmt.Sprintf("when %q: the element is not JSON: %v", act.When, err)}}
		}
		env.Item = integral(env.Item)
	}
	ok, err := definition.EvalWhen(act.When, env)
	switch {
	case err != nil:
		return &DataError{Problems: []string{err.Error()}}
	case !ok:
		return &elementSkipped{reason: fmt.Sprintf("skipped: when %q is false for element %d", act.When, *claimed.ItemIndex)}
	}
	return nil
}

// integral makes each whole number of a JSON value an int, so that an
// element of [1, 2, 3] can be tested with item % 2 (the expression
// language refuses % on a float, which is how JSON numbers decode).
func integral(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int(x)
		}
	case []any:
		for i := range x {
			x[i] = integral(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = integral(x[k])
		}
	}
	return v
}
