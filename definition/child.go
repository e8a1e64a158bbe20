package definition

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// An activity may run another workflow instead of a command (a child
// workflow, docs/sub-workflows.md):
//
//	ingest:
//	  workflow: ingest.yaml              # a file, beside this one
//	  # workflow: {name: ingest}         # or a registered definition
//	  params: {source: "{{ params.source }}"}
//
// The child's definition is read with the parent's and stored inside it,
// so an execution runs what its definition said when it started, and a
// definition that includes itself, directly or not, is refused when it is
// read, naming the chain.

// ChildWorkflow names the workflow an activity runs.
type ChildWorkflow struct {
	// File is the child's definition file, relative to the parent's.
	File string `yaml:"file,omitempty" json:"file,omitempty"`
	// Name is a definition registered with whimbrel register.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Definition is the child's definition, read with the parent's and
	// stored with it; nil until it is resolved.
	Definition *Workflow `yaml:"-" json:"definition,omitempty"`
}

// DefaultMaxDepth caps how deep workflows nest: a parent at depth 1 may
// run children down to depth DefaultMaxDepth.
const DefaultMaxDepth = 5

// LaunchWorkflow is the launch type of an activity that runs a child
// workflow: it needs no backend process, for the launcher starts the
// child execution itself.
const LaunchWorkflow = "workflow"

// childRefKeys are the fields of a workflow: mapping.
var childRefKeys = []string{"file", "name"}

// UnmarshalYAML reads `workflow: FILE` or `workflow: {file: F}` or
// `workflow: {name: N}`.
func (c *ChildWorkflow) UnmarshalYAML(n *yaml.Node) error {
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" || n.Value == "" {
			return fmt.Errorf("workflow must name a file or be {name: REGISTERED}")
		}
		c.File = n.Value
		return nil
	case yaml.MappingNode:
		var raw struct {
			File string `yaml:"file"`
			Name string `yaml:"name"`
		}
		if err := n.Decode(&raw); err != nil {
			return fmt.Errorf("workflow must be a file name or {name: REGISTERED}")
		}
		c.File, c.Name = raw.File, raw.Name
		return nil
	}
	return fmt.Errorf("workflow must be a file name or {name: REGISTERED}")
}

// IsChild reports whether the activity runs a child workflow.
func (a *Activity) IsChild() bool { return a != nil && a.Workflow != nil }

// checkChildKey checks, where the YAML still knows the lines, the fields
// of a child workflow: an activity's workflow and params, and the
// workflow's outputs. It reports whether it handled the key.
func checkChildKey(p *problems, key string, v *yaml.Node, where string) bool {
	v = resolve(v)
	switch {
	case key == "workflow" && where != "the workflow":
		if v.Kind == yaml.MappingNode {
			checkKeys(p, v, where+": workflow", childRefKeys)
		} else if v.Kind != yaml.ScalarNode || v.Tag == "!!null" || v.Value == "" {
			p.add(v.Line, "%s: workflow must be a file name or {name: REGISTERED}", where)
		}
		return true
	case key == "params" && where != "the workflow", key == "outputs" && where == "the workflow":
		if v.Kind != yaml.MappingNode {
			p.add(v.Line, "%s: %s must be a mapping of NAME: template", where, key)
			return true
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			if val := resolve(v.Content[i+1]); val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
				p.add(val.Line, "%s: %s %s must be text", where, key, v.Content[i].Value)
			}
		}
		return true
	}
	return false
}

// checkChild checks an activity that runs a child workflow: it has no
// command, its params are templates over the parent's data, and the
// child's definition, when resolved, is checked as a whole. depth is the
// parent's nesting depth.
func (d *Workflow) checkChild(p *problems, n string, line int) {
	a := d.Activities[n]
	if a.Workflow == nil {
		if len(a.Params) > 0 {
			p.add(line, "activity %q: params are for an activity that runs a workflow: add `workflow:` or move them to the command", n)
		}
		return
	}
	if len(a.Command) > 0 {
		p.add(line, "activity %q runs a workflow and a command: give one of them", n)
	}
	if (a.Workflow.File == "") == (a.Workflow.Name == "") {
		p.add(line, "activity %q: workflow must name a file or a registered name, not both", n)
	}
	for _, k := range sortedKeys(a.Params) {
		d.checkTemplate(p, n, "params "+k, a.Params[k], line)
	}
	if c := a.Workflow.Definition; c != nil {
		if depth := c.depth(); depth+1 > DefaultMaxDepth {
			p.add(line, "activity %q: the workflows nest %d deep, more than %d: %s", n, depth+1, DefaultMaxDepth, strings.Join(d.deepest(), " → "))
		}
		for _, k := range sortedKeys(a.Params) {
			if _, ok := c.Params[k]; !ok {
				p.add(line, "activity %q: params %s: workflow %q declares no such parameter", n, k, c.Name)
			}
		}
		for _, k := range sortedKeys(c.Params) {
			if decl := c.Params[k]; decl != nil && decl.Required && decl.Default == nil {
				if _, ok := a.Params[k]; !ok {
					p.add(line, "activity %q: workflow %q requires the parameter %s: give it under `params:`", n, c.Name, k)
				}
			}
		}
	}
}

// checkTemplate checks one template of activity n, as checkTemplates does.
func (d *Workflow) checkTemplate(p *problems, n, where, s string, line int) {
	a := d.Activities[n]
	refs, err := Refs(s)
	if err != nil {
		p.add(line, "activity %q: %s: %v", n, where, err)
		return
	}
	for _, r := range refs {
		switch r.Kind {
		case "params":
			if _, ok := d.Params[r.Path[0]]; !ok {
				p.add(line, "activity %q: %s: {{ %s }} names a parameter the workflow does not declare under `params:`", n, where, r)
			}
		case "outputs":
			if !containsString(a.DependsOn, r.Activity) {
				p.add(line, "activity %q: %s: {{ %s }} names %q, which is not in its depends_on: only direct upstream outputs can be read", n, where, r, r.Activity)
			}
		}
	}
}

// checkOutputs checks the workflow's outputs: templates over its
// parameters and the outputs of any of its activities.
func (d *Workflow) checkOutputs(p *problems) {
	for _, k := range sortedKeys(d.Outputs) {
		refs, err := Refs(d.Outputs[k])
		if err != nil {
			p.add(0, "outputs %s: %v", k, err)
			continue
		}
		for _, r := range refs {
			switch {
			case r.Kind == "params":
				if _, ok := d.Params[r.Path[0]]; !ok {
					p.add(0, "outputs %s: {{ %s }} names a parameter the workflow does not declare under `params:`", k, r)
				}
			case r.Kind == "outputs" && d.Activities[r.Activity] == nil:
				p.add(0, "outputs %s: {{ %s }} names %q, which is not an activity of this workflow", k, r, r.Activity)
			}
		}
	}
}

// depth is how deep the workflow nests: 1 for one that runs no child.
func (d *Workflow) depth() int { return len(d.deepest()) }

// deepest is the longest chain of workflow names from d down its
// children.
func (d *Workflow) deepest() []string {
	var best []string
	for _, n := range sortedKeys(d.Activities) {
		if a := d.Activities[n]; a.IsChild() && a.Workflow.Definition != nil {
			if c := a.Workflow.Definition.deepest(); len(c) > len(best) {
				best = c
			}
		}
	}
	return append([]string{d.Name}, best...)
}

// CycleError says that a definition includes itself, directly or not.
type CycleError struct {
	Chain []string // the files or names, the first repeated last
}

func (e *CycleError) Error() string {
	return "the workflow includes itself: " + strings.Join(e.Chain, " → ") + ": a workflow cannot run itself as a child"
}

// DepthError says that workflows nest deeper than the cap.
type DepthError struct {
	Chain []string
	Max   int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("the workflows nest %d deep, more than %d: %s", len(e.Chain), e.Max, strings.Join(e.Chain, " → "))
}

// Registry finds a definition registered with whimbrel register, by name.
type Registry func(name string) (*Workflow, error)

// resolveChildren reads the definition of every child workflow of d, and
// theirs, down the tree: files relative to the file that names them,
// registered names through reg (nil: left unresolved, an error when the
// child starts). chain is the files and names from the root down to d.
func resolveChildren(d *Workflow, file string, chain []string, reg Registry) error {
	for _, n := range sortedKeys(d.Activities) {
		a := d.Activities[n]
		if !a.IsChild() || a.Workflow.Definition != nil {
			continue
		}
		ref, path := a.Workflow.Name, ""
		if a.Workflow.File != "" {
			path = a.Workflow.File
			if !filepath.IsAbs(path) {
				path = filepath.Join(filepath.Dir(file), path)
			}
			ref = filepath.Clean(path)
		} else if reg == nil {
			continue
		}
		here := append(append([]string{}, chain...), ref)
		for _, c := range chain {
			if c == ref {
				return &CycleError{Chain: here}
			}
		}
		if len(here) > DefaultMaxDepth {
			return &DepthError{Chain: here, Max: DefaultMaxDepth}
		}
		var child *Workflow
		var err error
		if path != "" {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				return fmt.Errorf("activity %q: read its workflow: %w", n, rerr)
			}
			child, err = Parse(path, b)
		} else {
			child, err = reg(ref)
		}
		if err != nil {
			return fmt.Errorf("activity %q: workflow %s: %w", n, ref, err)
		}
		if err := resolveChildren(child, path, here, reg); err != nil {
			return err
		}
		a.Workflow.Definition = child
	}
	return nil
}

// LoadWith reads and checks a definition file, with the definitions of
// its child workflows: files relative to it, registered ones found
// through reg (nil: left to be named when the child would start).
func LoadWith(path string, reg Registry) (*Workflow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read workflow definition: %w", err)
	}
	d, err := Parse(path, b)
	if err != nil {
		return nil, &InvalidError{Err: err}
	}
	if !d.hasChild() {
		return d, nil
	}
	if err := resolveChildren(d, path, []string{filepath.Clean(path)}, reg); err != nil {
		return nil, &InvalidError{Err: fmt.Errorf("%s: %w", path, err)}
	}
	// Checked again whole: the nesting depth, and each child's params.
	if err := d.validate(path, nil); err != nil {
		return nil, &InvalidError{Err: err}
	}
	return d, nil
}

func (d *Workflow) hasChild() bool {
	for _, a := range d.Activities {
		if a.IsChild() {
			return true
		}
	}
	return false
}

// ChildParams resolves the params an activity hands its child workflow
// against the parent's data.
func (a *Activity) ChildParams(dt Data) (map[string]string, error) {
	out := map[string]string{}
	var errs []string
	for _, k := range sortedKeys(a.Params) {
		v, err := dt.Resolve(a.Params[k])
		if err != nil {
			errs = append(errs, fmt.Sprintf("params %s: %v", k, err))
		}
		out[k] = v
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// ChildOutput resolves the workflow's outputs against its execution's
// data (its parameters and every activity's output) into the compact
// JSON object its parent activity records; "" when it declares none.
func (s *Stored) ChildOutput(dt Data) (string, error) {
	if len(s.head.Outputs) == 0 {
		return "", nil
	}
	out := map[string]string{}
	var errs []string
	for _, k := range sortedKeys(s.head.Outputs) {
		v, err := dt.Resolve(s.head.Outputs[k])
		if err != nil {
			errs = append(errs, fmt.Sprintf("outputs %s: %v", k, err))
		}
		out[k] = v
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// OutputRefs lists the activities the workflow's outputs read.
func (s *Stored) OutputRefs() []string {
	seen := map[string]bool{}
	var out []string
	for _, k := range sortedKeys(s.head.Outputs) {
		refs, _ := Refs(s.head.Outputs[k])
		for _, r := range refs {
			if r.Kind == "outputs" && !seen[r.Activity] {
				seen[r.Activity] = true
				out = append(out, r.Activity)
			}
		}
	}
	return out
}

// Name is the stored definition's workflow name.
func (s *Stored) Name() string { return s.head.Name }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ResolveRegistered reads, through reg, the definition of every child
// workflow named by registration (workflow: {name: N}) down the tree,
// those of files already read included, and checks the whole again: a
// registered definition that includes itself, or nests deeper than the
// cap, is refused naming the chain of workflow names.
func (d *Workflow) ResolveRegistered(reg Registry) error {
	if !d.hasChild() {
		return nil
	}
	if err := resolveNames(d, []string{d.Name}, reg); err != nil {
		return err
	}
	return d.validate("workflow "+d.Name, nil)
}

func resolveNames(d *Workflow, chain []string, reg Registry) error {
	for _, n := range sortedKeys(d.Activities) {
		a := d.Activities[n]
		if !a.IsChild() {
			continue
		}
		c := a.Workflow.Definition
		name := a.Workflow.Name
		if c != nil {
			name = c.Name
		}
		here := append(append([]string{}, chain...), name)
		if c == nil {
			for _, up := range chain {
				if up == name {
					return &CycleError{Chain: here}
				}
			}
		}
		if len(here) > DefaultMaxDepth {
			return &DepthError{Chain: here, Max: DefaultMaxDepth}
		}
		if c == nil {
			var err error
			if c, err = reg(name); err != nil {
				return fmt.Errorf("activity %q: registered workflow %s: %w", n, name, err)
			}
		}
		if err := resolveNames(c, here, reg); err != nil {
			return err
		}
		a.Workflow.Definition = c
	}
	return nil
}
