package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A for_each activity runs once per element of a JSON list (docs/for-each.md):
//
//	convert:
//	  depends_on: [list]
//	  for_each: "{{ outputs.list.files }}"   # a template that resolves to a JSON list
//	  # for_each: [a, b, c]                  # or the list itself
//	  # for_each: {count: "{{ params.n }}"}   # or the numbers 0..N-1
//	  max_running: 50
//	  tolerated_failures: 2%
//	  command: ["convert", "{{ item }}"]

// The references of a template that name the element a for_each
// activity runs for.
const (
	refItem      = "item"       // {{ item }}, {{ item.KEY }}
	refItemIndex = "item_index" // {{ item_index }}
)

// Limits of a for_each list.
const (
	DefaultMaxItems = 10000  // the most elements a list may have unless max_items says otherwise
	MaxMaxItems     = 100000 // the most max_items may say
	// MaxElement is the most bytes one element's JSON may take: it is
	// kept on the element's item, which must stay small.
	MaxElement = 2048
)

// ForEach is what a for_each activity runs over: a template that resolves
// to a JSON list, a list written inline, or a count.
type ForEach struct {
	Template string            // resolves to a JSON list
	Inline   []json.RawMessage // the list, as written (Listed says it was)
	Listed   bool
	Count    string // resolves to a non-negative whole number
}

// UnmarshalYAML reads a template, a list, or {count: ...}.
func (f *ForEach) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		f.Template = n.Value
		return nil
	case yaml.SequenceNode:
		var list []any
		if err := n.Decode(&list); err != nil {
			return err
		}
		return f.setInline(list)
	case yaml.MappingNode:
		var m map[string]any
		if err := n.Decode(&m); err != nil {
			return err
		}
		return f.setCount(m)
	}
	return fmt.Errorf("line %d: for_each must be a template, a list, or {count: N}", n.Line)
}

// UnmarshalJSON reads the stored form, which MarshalJSON writes.
func (f *ForEach) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &f.Template)
	case len(b) > 0 && b[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		f.Inline, f.Listed = list, true
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New("for_each must be a template, a list, or {count: N}")
	}
	return f.setCount(m)
}

// MarshalJSON writes the form it was given in.
func (f ForEach) MarshalJSON() ([]byte, error) {
	switch {
	case f.Listed:
		if f.Inline == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(f.Inline)
	case f.Count != "":
		return json.Marshal(map[string]string{"count": f.Count})
	}
	return json.Marshal(f.Template)
}

func (f *ForEach) setInline(list []any) error {
	f.Listed, f.Inline = true, make([]json.RawMessage, 0, len(list))
	for _, e := range list {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("for_each: %w", err)
		}
		f.Inline = append(f.Inline, b)
	}
	return nil
}

func (f *ForEach) setCount(m map[string]any) error {
	c, ok := m["count"]
	if !ok || len(m) != 1 {
		return errors.New("for_each as a mapping takes one key, count: write {count: 10} or {count: \"{{ outputs.A.n }}\"}")
	}
	switch v := c.(type) {
	case string:
		f.Count = v
	case int:
		f.Count = strconv.Itoa(v)
	case float64:
		f.Count = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Errorf("for_each: count %v is not a number or a template", c)
	}
	if f.Count == "" {
		return errors.New("for_each: count is empty")
	}
	return nil
}

// Tolerance is how many elements of a for_each list may fail for good
// with the map still completing: a count ("3") or a percent of the
// list's length ("2%"). Empty: none.
type Tolerance string

// UnmarshalJSON takes a number or a string.
func (t *Tolerance) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = Tolerance(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return errors.New("tolerated_failures must be a count or a percent such as 2%")
	}
	*t = Tolerance(n.String())
	return nil
}

// Of returns how many of n elements may fail.
func (t Tolerance) Of(n int) (int, error) {
	s := strings.TrimSpace(string(t))
	if s == "" {
		return 0, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("tolerated_failures %q is not a percent from 0%% to 100%%", s)
		}
		return int(f * float64(n) / 100), nil
	}
	c, err := strconv.Atoi(s)
	if err != nil || c < 0 {
		return 0, fmt.Errorf("tolerated_failures %q is not a count (such as 3) or a percent (such as 2%%)", s)
	}
	return c, nil
}

// MaxItemsOr is the most elements a's list may have.
func (a *Activity) MaxItemsOr() int {
	if a.MaxItems > 0 {
		return a.MaxItems
	}
	return DefaultMaxItems
}

// checkForEach checks the fields of a for_each activity, and that no
// other activity has them.
func (d *Workflow) checkForEach(p *problems, name string, line int) {
	a := d.Activities[name]
	if a.ForEach == nil {
		if a.MaxItems != 0 || a.MaxRunning != 0 || a.ToleratedFailures != "" {
			p.add(line, "activity %q: max_items, max_running and tolerated_failures apply to a for_each activity only: add for_each, or remove them", name)
		}
		return
	}
	if a.MaxItems < 0 || a.MaxItems > MaxMaxItems {
		p.add(line, "activity %q: max_items %d is not from 1 to %d", name, a.MaxItems, MaxMaxItems)
	}
	if a.MaxRunning < 0 {
		p.add(line, "activity %q: max_running %d is negative", name, a.MaxRunning)
	}
	if _, err := a.ToleratedFailures.Of(100); err != nil {
		p.add(line, "activity %q: %v", name, err)
	}
	f := a.ForEach
	if f.Listed && len(f.Inline) > a.MaxItemsOr() {
		p.add(line, "activity %q: for_each lists %d elements, more than max_items %d", name, len(f.Inline), a.MaxItemsOr())
	}
	for _, s := range []string{f.Template, f.Count} {
		refs, err := Refs(s)
		if err != nil {
			p.add(line, "activity %q: for_each: %v", name, err)
			continue
		}
		for _, r := range refs {
			switch r.Kind {
			case "params":
				if _, ok := d.Params[r.Path[0]]; !ok {
					p.add(line, "activity %q: for_each: {{ %s }} names a parameter the workflow does not declare under `params:`", name, r)
				}
			case "outputs":
				if !containsString(a.DependsOn, r.Activity) {
					p.add(line, "activity %q: for_each: {{ %s }} names %q, which is not in its depends_on", name, r, r.Activity)
				}
			default:
				p.add(line, "activity %q: for_each: {{ %s }} cannot name the element it makes", name, r)
			}
		}
	}
}

// Elements resolves a's for_each against dt: the list, each element as
// compact JSON. An error names the value that is not a list (or not a
// count), a list over max_items, an element too large, or an element
// that lacks a key the templates of the command or env read.
func (a *Activity) Elements(dt Data, env map[string]string) ([]json.RawMessage, error) {
	f := a.ForEach
	if f == nil {
		return nil, errors.New("the activity has no for_each")
	}
	var list []json.RawMessage
	switch {
	case f.Listed:
		list = f.Inline
	case f.Count != "":
		s, err := dt.Resolve(f.Count)
		if err != nil {
			return nil, fmt.Errorf("for_each count: %w", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("for_each count %s is not a non-negative whole number", quoteElement(s))
		}
		if n > a.MaxItemsOr() {
			return nil, fmt.Errorf("for_each count %d is more than max_items %d", n, a.MaxItemsOr())
		}
		list = make([]json.RawMessage, n)
		for i := range list {
			list[i] = json.RawMessage(strconv.Itoa(i))
		}
	default:
		s, err := dt.Resolve(f.Template)
		if err != nil {
			return nil, fmt.Errorf("for_each: %w", err)
		}
		if err := json.Unmarshal([]byte(s), &list); err != nil || (list == nil && strings.TrimSpace(s) != "[]") {
			return nil, fmt.Errorf("for_each %q resolved to %s, which is not a JSON list", f.Template, quoteElement(s))
		}
	}
	if len(list) > a.MaxItemsOr() {
		return nil, fmt.Errorf("for_each has %d elements, more than max_items %d (raise max_items, up to %d, or split the list)", len(list), a.MaxItemsOr(), MaxMaxItems)
	}
	out := make([]json.RawMessage, len(list))
	for i, e := range list {
		var b bytes.Buffer
		if err := json.Compact(&b, e); err != nil {
			return nil, fmt.Errorf("for_each element %d: %w", i, err)
		}
		if b.Len() > MaxElement {
			return nil, fmt.Errorf("for_each element %d is %d bytes, more than the %d an element may be: pass a reference (a path, a key) instead", i, b.Len(), MaxElement)
		}
		out[i] = b.Bytes()
	}
	// Every element must resolve every template, or none is created.
	templates := append([]string(nil), a.Command...)
	for _, v := range env {
		templates = append(templates, v)
	}
	for _, t := range templates {
		refs, err := Refs(t)
		if err != nil {
			continue // refused when the definition was read
		}
		for _, r := range refs {
			if r.Kind != refItem || len(r.Path) == 0 {
				continue
			}
			for i, e := range out {
				if _, err := walkJSON(e, refItem, r.Path); err != nil {
					return nil, fmt.Errorf("for_each element %d (%s): {{ %s }}: %v", i, quoteElement(string(e)), r, err)
				}
			}
		}
	}
	return out, nil
}

// quoteElement quotes a value for a reason, cut to a readable length.
func quoteElement(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strconv.Quote(s)
}
