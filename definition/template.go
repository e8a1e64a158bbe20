package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Templates in an activity's command and env values hand it data from the
// execution, in Argo's syntax:
//
//	{{ params.NAME }}              a parameter of the execution
//	{{ outputs.ACTIVITY.KEY }}     a value of a direct upstream's output;
//	                               KEY is a dotted path into the JSON
//	                               object (a number indexes a list)
//	{{ params.NAME | shquote }}    the value as one POSIX shell word
//	{{ "{{" }}                     a literal {{
//
// The references are checked when the definition is read (only declared
// parameters and activities listed in depends_on, only known filters),
// and resolved by the wrapper when the activity starts: a reference that
// cannot be resolved then fails the activity. A string is replaced by its
// text, a number or boolean by its JSON text, an object or list by its
// compact JSON; the filters, left to right, then apply to that text.

// Ref is one reference of a template.
type Ref struct {
	Kind     string   // "params" or "outputs"
	Activity string   // for outputs: the upstream activity
	Path     []string // params: the name; outputs: the keys into the output
	// Filters apply to the value, in order (see Filters).
	Filters []string
}

// String writes the reference as a template holds it, without the
// braces: params.NAME or outputs.ACTIVITY.KEY, then each filter after a |.
func (r Ref) String() string {
	s := "outputs." + r.Activity + "." + strings.Join(r.Path, ".")
	switch r.Kind {
	case "params", "workflow":
		s = r.Kind + "." + strings.Join(r.Path, ".")
	case refItem, refItemIndex:
		s = strings.Join(append([]string{r.Kind}, r.Path...), ".")
	}
	for _, f := range r.Filters {
		s += " | " + f
	}
	return s
}

// quoted reports whether the reference's value ends as one shell word:
// its last filter is shquote.
func (r Ref) quoted() bool {
	return len(r.Filters) > 0 && r.Filters[len(r.Filters)-1] == FilterShquote
}

// FilterShquote is the filter that makes a value one POSIX shell word.
const FilterShquote = "shquote"

// filters are the filters a template may apply, by name.
var filters = map[string]func(string) (string, error){
	FilterShquote: Shquote,
}

// segment is a piece of a template: literal text, or a reference.
type segment struct {
	text string
	ref  *Ref
}

const literalOpen = `"{{"`

// parseTemplate splits s into literal text and references.
func parseTemplate(s string) ([]segment, error) {
	var out []segment
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			if rest != "" {
				out = append(out, segment{text: rest})
			}
			return out, nil
		}
		if i > 0 {
			out = append(out, segment{text: rest[:i]})
		}
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("%q opens {{ without closing it with }} (write a literal {{ as {{ %s }})", s, literalOpen)
		}
		inner := strings.TrimSpace(rest[i+2 : i+2+j])
		rest = rest[i+2+j+2:]
		if inner == literalOpen {
			out = append(out, segment{text: "{{"})
			continue
		}
		ref, err := parseRef(inner)
		var fe filterError
		switch {
		case errors.As(err, &fe):
			return nil, fmt.Errorf("%q: {{ %s }} %v", s, inner, err)
		case err != nil:
			return nil, fmt.Errorf("%q: {{ %s }} %v (write a literal {{ as {{ %s }})", s, inner, err, literalOpen)
		}
		out = append(out, segment{ref: ref})
	}
}

// filterError says a template names a filter that does not exist.
type filterError string

// Error returns the message.
func (e filterError) Error() string { return string(e) }

// parseRef reads the inside of {{ }}: a reference, and the filters that
// follow it, each after a |.
func parseRef(inner string) (*Ref, error) {
	pieces := strings.Split(inner, "|")
	var fs []string
	for _, f := range pieces[1:] {
		f = strings.TrimSpace(f)
		if _, ok := filters[f]; !ok {
			if f == "" {
				return nil, filterError(fmt.Sprintf("has an empty filter: write {{ REF | %s }}", FilterShquote))
			}
			return nil, filterError(fmt.Sprintf("applies filter %q, which is not known (known: %s)", f, FilterShquote))
		}
		fs = append(fs, f)
	}
	ref, err := parsePath(strings.TrimSpace(pieces[0]))
	if err != nil {
		return nil, err
	}
	ref.Filters = fs
	return ref, nil
}

func parsePath(inner string) (*Ref, error) {
	parts := strings.Split(inner, ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t\r\n{}\"") {
			return nil, fmt.Errorf("is not a reference: use {{ params.NAME }}, {{ outputs.ACTIVITY.KEY }}, {{ item }} or {{ item_index }}")
		}
	}
	switch {
	case parts[0] == refItem || (parts[0] == refItemIndex && len(parts) == 1):
		return &Ref{Kind: parts[0], Path: parts[1:]}, nil
	case parts[0] == "params" && len(parts) == 2:
		return &Ref{Kind: "params", Path: parts[1:]}, nil
	case parts[0] == "params":
		return nil, fmt.Errorf("names no parameter: use {{ params.NAME }}")
	case parts[0] == "outputs" && len(parts) >= 3:
		return &Ref{Kind: "outputs", Activity: parts[1], Path: parts[2:]}, nil
	case parts[0] == "outputs":
		return nil, fmt.Errorf("names no key of an output: use {{ outputs.ACTIVITY.KEY }}")
	case parts[0] == "workflow":
		return workflowRef(parts)
	}
	return nil, fmt.Errorf("is not a reference: use {{ params.NAME }} or {{ outputs.ACTIVITY.KEY }}")
}

// Refs lists the references of a template, or says why it is malformed.
func Refs(s string) ([]Ref, error) {
	segs, err := parseTemplate(s)
	if err != nil {
		return nil, err
	}
	var out []Ref
	for _, sg := range segs {
		if sg.ref != nil {
			out = append(out, *sg.ref)
		}
	}
	return out, nil
}

// Data is what templates are resolved against: the execution's
// parameters and the outputs of the activity's direct upstreams, each a
// JSON object (nil: the upstream recorded none).
type Data struct {
	Params  map[string]string
	Outputs map[string]json.RawMessage
	// Workflow holds the execution's name, id and, for a finally
	// activity, the workflow's outcome as state (see workflowRef).
	Workflow map[string]string
	// Element is the element of a for_each list the activity runs for
	// (nil: it runs for none); Index its place in the list.
	Element json.RawMessage
	Index   int
}

// Resolve replaces the references of a template with their values. A
// reference that cannot be resolved is an error naming it.
func (dt Data) Resolve(s string) (string, error) {
	segs, err := parseTemplate(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, sg := range segs {
		if sg.ref == nil {
			b.WriteString(sg.text)
			continue
		}
		v, err := dt.value(*sg.ref)
		for _, f := range sg.ref.Filters {
			if err == nil {
				v, err = filters[f](v)
			}
		}
		if err != nil {
			return "", fmt.Errorf("{{ %s }}: %w", sg.ref, err)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

func (dt Data) value(r Ref) (string, error) {
	if r.Kind == "params" {
		v, ok := dt.Params[r.Path[0]]
		if !ok {
			return "", fmt.Errorf("the execution has no parameter %q", r.Path[0])
		}
		return v, nil
	}
	if r.Kind == "workflow" {
		v, ok := dt.Workflow[r.Path[0]]
		if !ok {
			return "", fmt.Errorf("workflow.%s is known only to a finally activity", r.Path[0])
		}
		return v, nil
	}
	if r.Kind == refItem || r.Kind == refItemIndex {
		if dt.Element == nil {
			return "", fmt.Errorf("the activity runs for no element of a for_each list")
		}
		if r.Kind == refItemIndex {
			return strconv.Itoa(dt.Index), nil
		}
		return walkJSON(dt.Element, refItem, r.Path)
	}
	raw, ok := dt.Outputs[r.Activity]
	if !ok || len(raw) == 0 {
		return "", fmt.Errorf("activity %q recorded no output", r.Activity)
	}
	return walkJSON(raw, "outputs."+r.Activity, r.Path)
}

// walkJSON follows path (keys of objects, indexes of lists) into the JSON
// value raw, which the reference names by label, and returns the value's
// text as a template writes it.
func walkJSON(raw json.RawMessage, label string, path []string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var cur any
	if err := dec.Decode(&cur); err != nil {
		return "", fmt.Errorf("%s is not JSON: %v", label, err)
	}
	for i, k := range path {
		at := label + "." + strings.Join(path[:i+1], ".")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[k]
			if !ok {
				return "", fmt.Errorf("%s is absent (keys there: %s)", at, keysOf(c))
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(c) {
				return "", fmt.Errorf("%s: %q is not an index of a list of %d", at, k, len(c))
			}
			cur = c[n]
		default:
			return "", fmt.Errorf("%s: the value before it is not an object or a list", at)
		}
	}
	switch v := cur.(type) {
	case nil:
		return "", fmt.Errorf("the value is null")
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
}

func keysOf(m map[string]any) string {
	if len(m) == 0 {
		return "none"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	if len(ks) > 10 {
		ks = append(ks[:10], "…")
	}
	return strings.Join(ks, ", ")
}

// checkTemplates checks every template of an activity's command and env
// values: well-formed, naming declared parameters and direct upstreams.
// It warns of a value pasted raw into a shell script (see warnShell).
func (d *Workflow) checkTemplates(p *problems, name string, line int, env map[string]string) {
	a := d.Activities[name]
	check := func(where, s string, line int) {
		refs, err := Refs(s)
		if err != nil {
			p.add(line, "activity %q: %s: %v", name, where, err)
			return
		}
		for _, r := range refs {
			switch r.Kind {
			case "params":
				if _, ok := d.Params[r.Path[0]]; !ok {
					p.add(line, "activity %q: %s: {{ %s }} names a parameter the workflow does not declare under `params:`", name, where, r)
				}
			case "workflow":
				if r.Path[0] == "state" && d.Finally[name] == nil {
					p.add(line, "activity %q: %s: {{ %s }} is known only to a finally activity, which runs once the workflow's state is known", name, where, r)
				}
			case refItem, refItemIndex:
				if a.ForEach == nil {
					p.add(line, "activity %q: %s: {{ %s }} names the element of a for_each list, but the activity has no for_each", name, where, r)
				}
			case "outputs":
				if !containsString(a.DependsOn, r.Activity) {
					p.add(line, "activity %q: %s: {{ %s }} names %q, which is not in its depends_on: only direct upstream outputs can be read", name, where, r, r.Activity)
				}
			}
		}
	}
	commandLine := func(i int) int {
		if l := p.pos.commandLine(name, i); l > 0 {
			return l
		}
		return line
	}
	for i, c := range a.Command {
		check(fmt.Sprintf("command[%d]", i), c, commandLine(i))
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		check("env "+k, env[k], line)
	}
	for _, i := range shellScripts(a.Command) {
		d.warnShell(p, name, i, commandLine(i))
	}
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
