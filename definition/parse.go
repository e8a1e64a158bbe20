package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FromJSON reads the definition stored with an execution (what
// Workflow.JSON wrote, or another client's JSON) whole, and checks it as
// Parse does; a caller that needs one activity's entry reads it with
// ReadStored instead.
func FromJSON(s string) (*Workflow, error) {
	var d Workflow
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return nil, fmt.Errorf("stored definition: %w", err)
	}
	if err := d.validate("stored definition", nil); err != nil {
		return nil, err
	}
	return &d, nil
}

// Load reads and checks a definition file, with the definitions of the
// child workflows it names by file (see LoadWith).
func Load(path string) (*Workflow, error) { return LoadWith(path, nil) }

// InvalidError is a definition file that was read but is not a workflow
// Whimbrel can run: every problem, each with its line. A command exits
// with its usage status for it, as for a bad flag.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Parse reads and checks a definition; file names it in errors. Every
// problem found is reported, each with its line.
func Parse(file string, b []byte) (*Workflow, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: the file is empty: a workflow needs a name and activities", file)
		}
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s:%d: a second YAML document: a file holds one workflow", file, more.Line)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: the file is empty: a workflow needs a name and activities", file)
	}
	doc := root.Content[0]
	if len(b) > maxDefinition {
		return nil, fmt.Errorf("%s: %d bytes is more than a workflow definition may be (%d)", file, len(b), maxDefinition)
	}
	p := &problems{file: file, open: map[*yaml.Node]bool{}, done: map[*yaml.Node]bool{}}
	checkKeys(p, doc, "the workflow", topKeys)
	if p.err() != nil {
		return nil, p.err()
	}
	var d Workflow
	if err := doc.Decode(&d); err != nil {
		return nil, fmt.Errorf("%s: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := d.validate(file, positionsOf(doc)); err != nil {
		return nil, err
	}
	return &d, nil
}

// positions are the lines of a definition's parts in its YAML, for
// errors and warnings; a definition read from its stored JSON has none
// (nil), and every line is then 0: no line.
type positions struct {
	activity map[string]int            // activity name → line of its name
	command  map[string][]int          // activity name → line of each command entry
	param    map[string]map[string]int // param name → field ("" for the name) → line
	when     map[string]int            // activity name → line of its when
}

// positionsOf finds the lines of the activities, their command entries
// and the parameters' fields in a workflow's mapping.
func positionsOf(doc *yaml.Node) *positions {
	pos := &positions{activity: map[string]int{}, command: map[string][]int{}, param: map[string]map[string]int{}, when: map[string]int{}}
	for _, acts := range []*yaml.Node{field(doc, "activities"), field(doc, "finally")} {
		if acts == nil || acts.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(acts.Content); i += 2 {
			name := acts.Content[i].Value
			pos.activity[name] = acts.Content[i].Line
			if cmd := field(acts.Content[i+1], "command"); cmd != nil && cmd.Kind == yaml.SequenceNode {
				for _, e := range cmd.Content {
					pos.command[name] = append(pos.command[name], e.Line)
				}
			}
			if w := field(acts.Content[i+1], "when"); w != nil {
				pos.when[name] = w.Line
			}
		}
	}
	if params := field(doc, "params"); params != nil && params.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(params.Content); i += 2 {
			f := map[string]int{"": params.Content[i].Line}
			if decl := resolve(params.Content[i+1]); decl.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(decl.Content); j += 2 {
					f[decl.Content[j].Value] = decl.Content[j].Line
				}
			}
			pos.param[params.Content[i].Value] = f
		}
	}
	return pos
}

func (pos *positions) activityLine(name string) int {
	if pos == nil {
		return 0
	}
	return pos.activity[name]
}

// commandLine is the line of command entry i of an activity, or else of
// the activity.
func (pos *positions) commandLine(name string, i int) int {
	if pos == nil {
		return 0
	}
	if lines := pos.command[name]; i < len(lines) {
		return lines[i]
	}
	return pos.activity[name]
}

// paramLine is the line of a field of a parameter's declaration, or else
// of its name.
func (pos *positions) paramLine(name, field string) int {
	if pos == nil {
		return 0
	}
	if l, ok := pos.param[name][field]; ok {
		return l
	}
	return pos.param[name][""]
}

var (
	topKeys      = []string{"name", "description", "retention", "defaults", "activities", "params", "outputs", "finally", "notify", "deadline", "concurrency"}
	settingKeys  = []string{"env", "heartbeat_interval", "heartbeat_timeout", "timeout", "queued_timeout", "kill_grace", "launch", "retry", "pool", "pool_slots"}
	activityKeys = append([]string{"description", "command", "depends_on", "workflow", "params", "when", "trigger_rule", "for_each", "max_items", "max_running", "tolerated_failures"}, settingKeys...)
	launchKeys   = []string{"type", "image", "docker_args", "cluster", "task_definition", "container", "launch_type",
		"platform_version", "subnets", "security_groups", "assign_public_ip", "capacity_provider", "retry_for",
		"namespace", "service_account", "resources", "node_selector", "job_template"}
)

// maxDefinition bounds a definition's size: it is stored with every
// execution, in one item.
const maxDefinition = 256 << 10

// problems collects the errors of one definition.
type problems struct {
	file string
	list []string
	// warnings are what a definition may do but should not: it still
	// runs (see Workflow.Warnings).
	warnings []string
	pos      *positions          // the lines of the parts, when read from YAML
	open     map[*yaml.Node]bool // the mappings being checked, to catch a merge into itself
	done     map[*yaml.Node]bool // the mappings checked: anchors merged many times are checked once
}

func (p *problems) add(line int, format string, args ...any) {
	loc := p.file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", p.file, line)
	}
	p.list = append(p.list, loc+": "+fmt.Sprintf(format, args...))
}

func (p *problems) warn(line int, format string, args ...any) {
	loc := p.file
	if line > 0 {
		loc = fmt.Sprintf("%s:%d", p.file, line)
	}
	p.warnings = append(p.warnings, loc+": "+fmt.Sprintf(format, args...))
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return errors.New(strings.Join(p.list, "\n"))
}

func field(m *yaml.Node, key string) *yaml.Node {
	m = resolve(m)
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return resolve(m.Content[i+1])
		}
	}
	return nil
}

// resolve follows an alias (*name) to the node its anchor (&name) marks.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// The kinds of the fields' values.
var (
	durationKeys = []string{"deadline", "heartbeat_interval", "heartbeat_timeout", "timeout", "queued_timeout", "kill_grace", "retention", "retry_for",
		"interval", "max_delay"}
	listKeys = []string{"command", "depends_on", "docker_args", "subnets", "security_groups"}
	textKeys = []string{"name", "description", "type", "pattern", "image", "cluster", "task_definition", "container",
		"launch_type", "platform_version", "capacity_provider", "namespace", "service_account", "job_template", "pool"}
)

// checkValue checks the kind of one field's value where the YAML still
// knows its line.
func checkValue(p *problems, key string, v *yaml.Node, where string) {
	v = resolve(v)
	isNull := v.Kind == yaml.ScalarNode && v.Tag == "!!null"
	switch {
	case slices.Contains(durationKeys, key):
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: %s must be a duration such as 30s, 15m or 1h", where, key)
			return
		}
		if d, err := ParseDuration(v.Value); err != nil {
			p.add(v.Line, "%s: %s %q is not a duration: write it as 30s, 15m, 1h or 7d", where, key, v.Value)
		} else if d < 0 {
			p.add(v.Line, "%s: %s %q is negative", where, key, v.Value)
		}
	case slices.Contains(listKeys, key):
		if v.Kind != yaml.SequenceNode {
			p.add(v.Line, "%s: %s must be a list, such as [a, b]", where, key)
			return
		}
		for _, e := range v.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" || e.Value == "" {
				p.add(e.Line, "%s: %s holds an empty or non-text entry", where, key)
			}
		}
	case slices.Contains(textKeys, key):
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: %s must be text", where, key)
		}
	case key == "env":
		if v.Kind != yaml.MappingNode {
			p.add(v.Line, "%s: env must be a mapping of NAME: value", where)
			return
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			if val := resolve(v.Content[i+1]); val.Kind != yaml.ScalarNode {
				p.add(val.Line, "%s: env %s must be text", where, v.Content[i].Value)
			}
		}
	case slices.Contains(retryValueKeys, key):
		checkRetryValue(p, key, v, where)
	case key == "resources", key == "node_selector":
		checkKubernetesValue(p, key, v, where)
	case key == "assign_public_ip", key == "required":
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
			p.add(v.Line, "%s: %s must be true or false", where, key)
		}
	case key == "default":
		if v.Kind != yaml.ScalarNode || isNull {
			p.add(v.Line, "%s: default must be text", where)
		}
	case key == "enum":
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			p.add(v.Line, "%s: enum must be a list of the values accepted, such as [eu, us]", where)
			return
		}
		for _, e := range v.Content {
			if e = resolve(e); e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				p.add(e.Line, "%s: enum holds a null or non-text entry", where)
			}
		}
	}
}

// checkKeys refuses unknown and repeated keys of a mapping, suggesting the
// nearest known key, and descends into the mappings it knows.
func checkKeys(p *problems, m *yaml.Node, where string, known []string) {
	m = resolve(m)
	if m.Kind != yaml.MappingNode {
		p.add(m.Line, "%s must be a mapping of fields", where)
		return
	}
	if p.open[m] {
		p.add(m.Line, "%s merges (<<) a mapping into itself", where)
		return
	}
	if p.done[m] {
		return
	}
	p.open[m] = true
	defer func() { delete(p.open, m); p.done[m] = true }()
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], resolve(m.Content[i+1])
		if k.Value == "<<" { // a merge key brings in the fields of an anchor
			merged := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				merged = v.Content
			}
			for _, mm := range merged {
				checkKeys(p, mm, where, known)
			}
			continue
		}
		if where == "the workflow" && strings.HasPrefix(k.Value, "x-") {
			continue // a place for anchors, by convention
		}
		if first, dup := seen[k.Value]; dup {
			p.add(k.Line, "%s: %q is given twice (first at line %d)", where, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("%s: unknown field %q", where, k.Value)
			if s := suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += " (known: " + strings.Join(known, ", ") + ")"
			}
			p.add(k.Line, "%s", msg)
			continue
		}
		if checkChildKey(p, k.Value, v, where) {
			continue
		}
		checkValue(p, k.Value, v, where)
		switch k.Value {
		case "defaults":
			checkKeys(p, v, "defaults", settingKeys)
		case "launch":
			checkKeys(p, v, where+": launch", launchKeys)
		case "retry":
			checkKeys(p, v, where+": retry", retryKeys)
		case "notify":
			checkNotifyNode(p, v)
		case "concurrency":
			checkConcurrencyNode(p, v) // concurrency.go
		case "params":
			if v.Kind != yaml.MappingNode {
				p.add(v.Line, "params must be a mapping from parameter name to {type, required, default, enum, pattern, description}")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				name, decl := v.Content[j], resolve(v.Content[j+1])
				if decl.Kind == yaml.ScalarNode && decl.Tag == "!!null" {
					continue // declared, optional, no default
				}
				checkKeys(p, decl, fmt.Sprintf("param %q", name.Value), paramKeys)
			}
		case "activities", "finally":
			if v.Kind != yaml.MappingNode {
				p.add(v.Line, "%s must be a mapping from activity name to activity", k.Value)
				continue
			}
			names := map[string]int{}
			for j := 0; j+1 < len(v.Content); j += 2 {
				name, act := v.Content[j], resolve(v.Content[j+1])
				if first, dup := names[name.Value]; dup {
					p.add(name.Line, "activity %q is defined twice (first at line %d)", name.Value, first)
					continue
				}
				names[name.Value] = name.Line
				if act.Kind == yaml.ScalarNode && act.Tag == "!!null" {
					p.add(name.Line, "activity %q is empty: give it a command (or a launch)", name.Value)
					continue
				}
				checkKeys(p, act, fmt.Sprintf("activity %q", name.Value), activityKeys)
			}
		}
	}
}

// suggest returns the known key nearest to s, if it is near enough to be a
// typo. A few lines of edit distance do not warrant a dependency.
func suggest(s string, known []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, k := range known {
		if d := editDistance(s, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
