package definition

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The types a parameter may declare (Param.Type). A value is always text
// (it is stored, handed over and templated as text); the type says which
// texts are accepted, so that a value that reaches a command is the kind
// of value its author meant, whoever gave it.
const (
	TypeString = "string" // any text (the default)
	TypeInt    = "int"    // a whole number as JSON writes it: 42, -7 (no +, no leading zero, within 64 bits)
	TypeNumber = "number" // a number as JSON writes it: 3, -0.5, 1e6 (finite)
	TypeBool   = "bool"   // true or false
	TypeDate   = "date"   // a day of the calendar as YYYY-MM-DD: 2024-01-31
)

var paramTypes = []string{TypeString, TypeInt, TypeNumber, TypeBool, TypeDate}

var (
	intText    = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	numberText = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	dateText   = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

// typeRule says what a value of type t is, for an error: "is not an int"
// and this, after a colon.
var typeRule = map[string]string{
	TypeInt:    "write a whole number such as 42 or -7",
	TypeNumber: "write a number as JSON does, such as 3, -0.5 or 1e6",
	TypeBool:   "write true or false",
	TypeDate:   "write a day as YYYY-MM-DD, such as 2024-01-31",
}

// checkType says whether v is a value of type t ("" is string).
func checkType(t, v string) bool {
	switch t {
	case "", TypeString:
		return true
	case TypeInt:
		_, err := strconv.ParseInt(v, 10, 64)
		return intText.MatchString(v) && err == nil
	case TypeNumber:
		f, err := strconv.ParseFloat(v, 64)
		return numberText.MatchString(v) && err == nil && !math.IsInf(f, 0)
	case TypeBool:
		return v == "true" || v == "false"
	case TypeDate:
		_, err := time.Parse(time.DateOnly, v)
		return dateText.MatchString(v) && err == nil
	}
	return false
}

// compilePattern compiles a parameter's pattern so that it must match the
// whole value: a pattern is a rule for the value, not a search in it.
func compilePattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// check says whether v is a value this declaration accepts: of its type,
// one of its enum, matching its pattern. The error names the rule; Bind
// puts the parameter's name and the value before it.
func (p *Param) check(v string) error {
	if p == nil {
		return nil
	}
	if !checkType(p.Type, v) {
		article := "a"
		if p.Type == TypeInt {
			article = "an"
		}
		return fmt.Errorf("is not %s %s: %s", article, p.Type, typeRule[p.Type])
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
		return fmt.Errorf("is not one of %s", quoteList(p.Enum))
	}
	if p.Pattern != "" {
		re, err := compilePattern(p.Pattern)
		if err != nil {
			return fmt.Errorf("cannot be checked: the pattern %q does not compile: %v", p.Pattern, err)
		}
		if !re.MatchString(v) {
			return fmt.Errorf("does not match the pattern %q (the whole value must match)", p.Pattern)
		}
	}
	return nil
}

// checkDecl checks one declaration's type, enum, pattern and default; pos
// gives the lines of its fields, when known.
func checkDecl(pr *problems, name string, decl *Param) {
	if decl == nil {
		return
	}
	line := func(field string) int { return pr.pos.paramLine(name, field) }
	typeOK := true
	if decl.Type != "" && !slices.Contains(paramTypes, decl.Type) {
		typeOK = false
		msg := fmt.Sprintf("param %q: type %q is not known: use %s", name, decl.Type, strings.Join(paramTypes, ", "))
		if s := suggest(decl.Type, paramTypes); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		pr.add(line("type"), "%s", msg)
	}
	patternOK := true
	if decl.Pattern != "" {
		if _, err := regexp.Compile(decl.Pattern); err != nil {
			patternOK = false
			pr.add(line("pattern"), "param %q: pattern %q is not a regular expression (Go's RE2 syntax): %v", name, decl.Pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		} else if _, err := compilePattern(decl.Pattern); err != nil {
			patternOK = false
			pr.add(line("pattern"), "param %q: pattern %q is not a regular expression (Go's RE2 syntax): %v", name, decl.Pattern, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
	}
	if !typeOK || !patternOK {
		return // the values cannot be judged against a broken rule
	}
	for _, v := range decl.Enum {
		if !checkType(decl.Type, v) {
			pr.add(line("enum"), "param %q: enum value %s is not %s", name, quoteValue(v), typeName(decl.Type))
		} else if decl.Pattern != "" {
			if err := (&Param{Pattern: decl.Pattern}).check(v); err != nil {
				pr.add(line("enum"), "param %q: enum value %s %v", name, quoteValue(v), err)
			}
		}
	}
	if decl.Default != nil {
		if err := decl.check(*decl.Default); err != nil {
			pr.add(line("default"), "param %q: default %s %v", name, quoteValue(*decl.Default), err)
		}
	}
}

func typeName(t string) string {
	if t == TypeInt {
		return "an int"
	}
	return "a " + t
}

// quoteValue quotes a value for an error, escaping what a terminal would
// interpret, and shortening a long one.
func quoteValue(v string) string {
	const most = 80
	n := 0
	for i := range v { // by characters; an invalid byte counts as one
		if n == most {
			return strconv.Quote(v[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(v)
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = quoteValue(v)
	}
	return strings.Join(q, ", ")
}
