package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Param declares one parameter of a workflow:
//
//	params:
//	  date: {type: date, required: true, description: "the day to process"}
//	  base: {type: int, default: "0"}
//	  region: {enum: [eu, us]}
//	  table: {pattern: "[a-z_]+"}
//
// An execution's parameters are given with `whimbrel start|run --param
// k=v` or `--params-file F.json`, by a schedule, by a Simple-API request
// or by a rerun, checked against the declarations before anything is
// written (Bind, the one check every way in calls), stored with the
// execution, and handed to every activity (WHIMBREL_INPUTS,
// WHIMBREL_PARAM_<NAME>, and the template {{ params.NAME }}).
type Param struct {
	Required    bool    `yaml:"required,omitempty" json:"required,omitempty"`
	Description string  `yaml:"description,omitempty" json:"description,omitempty"`
	Default     *string `yaml:"default,omitempty" json:"default,omitempty"`
	// Type is one of the Type constants; empty is a string.
	Type string `yaml:"type,omitempty" json:"type,omitempty"`
	// Enum, when given, lists every value accepted.
	Enum []string `yaml:"enum,omitempty" json:"enum,omitempty"`
	// Pattern is a regular expression (Go's RE2 syntax) the whole value
	// must match.
	Pattern string `yaml:"pattern,omitempty" json:"pattern,omitempty"`
}

var paramKeys = []string{"required", "description", "default", "type", "enum", "pattern"}

// paramName is what a parameter may be called: it is written in
// templates, and becomes part of an environment variable's name.
var paramName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// ParamEnv is the environment variable that carries a parameter:
// WHIMBREL_PARAM_ and its name upper-cased, every character other than a
// letter or digit written as _.
func ParamEnv(name string) string {
	var b strings.Builder
	b.WriteString("WHIMBREL_PARAM_")
	for _, r := range strings.ToUpper(name) {
		if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// checkParams checks the declarations: names that templates and the
// environment can carry, no two mapped to one variable, no required
// parameter with a default (which would never be used).
func (d *Workflow) checkParams(p *problems) {
	names := make([]string, 0, len(d.Params))
	for n := range d.Params {
		names = append(names, n)
	}
	sort.Strings(names)
	env := map[string]string{}
	for _, n := range names {
		decl := d.Params[n]
		if !paramName.MatchString(n) {
			p.add(p.pos.paramLine(n, ""), "param %q: a name starts with a letter or _ and holds only letters, digits, _ and -", n)
			continue
		}
		if first, dup := env[ParamEnv(n)]; dup {
			p.add(p.pos.paramLine(n, ""), "params %q and %q would both be %s: rename one", first, n, ParamEnv(n))
		}
		env[ParamEnv(n)] = n
		if decl != nil && decl.Required && decl.Default != nil {
			p.add(p.pos.paramLine(n, ""), "param %q is required and has a default: drop one", n)
		}
		checkDecl(p, n, decl)
	}
}

// Bind checks the parameters given for an execution against the
// declarations, all at once: a parameter the definition does not declare,
// a required one missing, or a value its declaration does not accept (its
// type, enum or pattern) is refused, every one named in one error. It
// returns the execution's parameters: those given, and the defaults of
// the others.
//
// Bind is the one check of parameters: every way a run is started
// (start, run, rerun, a schedule, a Simple-API request) calls it, so a
// value refused by one is refused by all.
func (d *Workflow) Bind(given map[string]string) (map[string]string, error) {
	var errs []string
	names := make([]string, 0, len(given))
	for n := range given {
		names = append(names, n)
	}
	sort.Strings(names)
	declared := make([]string, 0, len(d.Params))
	for n := range d.Params {
		declared = append(declared, n)
	}
	sort.Strings(declared)
	for _, n := range names {
		if _, ok := d.Params[n]; !ok {
			msg := fmt.Sprintf("param %q is not declared by workflow %s", n, d.Name)
			if s := suggest(n, declared); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else if len(declared) > 0 {
				msg += " (it declares: " + strings.Join(declared, ", ") + ")"
			} else {
				msg += " (it declares none: add them under `params:`)"
			}
			errs = append(errs, msg)
		}
	}
	out := map[string]string{}
	for _, n := range declared {
		decl := d.Params[n]
		v, ok := given[n]
		switch {
		case ok:
			if err := decl.check(v); err != nil {
				errs = append(errs, fmt.Sprintf("param %q: %s %v", n, quoteValue(v), err))
				continue
			}
			out[n] = v
		case decl != nil && decl.Default != nil:
			out[n] = *decl.Default
		case decl != nil && decl.Required:
			msg := fmt.Sprintf("param %q is required", n)
			if decl.Description != "" {
				msg += ": " + decl.Description
			}
			errs = append(errs, msg+fmt.Sprintf(" (give it with --param %s=VALUE)", n))
		}
	}
	if len(errs) > 0 {
		return nil, &ParamsError{Problems: errs}
	}
	return out, nil
}

// ParamsError lists every problem with an execution's parameters.
type ParamsError struct {
	Problems []string
}

// Error names every problem: on one line when there is one, else one
// per line.
func (e *ParamsError) Error() string {
	if len(e.Problems) == 1 {
		return "parameters: " + e.Problems[0]
	}
	return "parameters:\n  " + strings.Join(e.Problems, "\n  ")
}

// ParseParams reads the parameters of a command line: each of args is
// KEY=VALUE, and file (if not empty) is a JSON object whose values are
// strings, numbers or booleans. A --param overrides the file's value.
// Every problem is reported in one error.
func ParseParams(args []string, file string) (map[string]string, error) {
	out := map[string]string{}
	var errs []string
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--params-file: %w", err)
		}
		m, err := DecodeParams(b)
		if err != nil {
			return nil, fmt.Errorf("--params-file %s: %w", file, err)
		}
		out = m
	}
	seen := map[string]bool{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok || k == "":
			errs = append(errs, fmt.Sprintf("--param %q: write it as KEY=VALUE", a))
			continue
		case seen[k]:
			errs = append(errs, fmt.Sprintf("--param %s is given twice", k))
			continue
		}
		seen[k] = true
		out[k] = v
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "\n"))
	}
	return out, nil
}

// DecodeParams reads a JSON object of parameters. Strings are taken as
// they are; numbers and booleans as their JSON text. Anything else (an
// object, a list, null) is refused, naming every such key.
func DecodeParams(b []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("want a JSON object of parameters, such as {\"date\": \"2024-01-31\"}: %w", err)
	}
	if raw == nil {
		return nil, errors.New("want a JSON object of parameters, not null")
	}
	var more json.RawMessage
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value: want one object")
	}
	out := make(map[string]string, len(raw))
	var errs []string
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := raw[k].(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = fmt.Sprint(v)
		default:
			errs = append(errs, fmt.Sprintf("param %q: want a string, number or boolean", k))
		}
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// EncodeParams is the form parameters are stored in with an execution: a
// JSON object of strings, keys sorted; none is the empty string.
func EncodeParams(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m) // a map of strings always encodes
	return string(b)
}

// StoredParams reads what EncodeParams wrote (or a foreign client's JSON
// object of parameters); the empty string is none.
func StoredParams(s string) (map[string]string, error) {
	if s == "" {
		return map[string]string{}, nil
	}
	m, err := DecodeParams([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("stored params: %w", err)
	}
	return m, nil
}
