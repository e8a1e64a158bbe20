package cli

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// kong says that a flag was given no value in words that name its Go type
// and a token ("expected string value but got "EOL" (<EOL>)"): noValue
// finds such an error, so that it can say instead what the flag wants.
var noValue = regexp.MustCompile(`^--([A-Za-z0-9][A-Za-z0-9-]*): (?:expected \S+ value but got "(.*)" \((.*)\)|missing value, expecting)`)

// explain rewrites a parse error of kong that does not say what a flag
// wants; any other error reads as kong wrote it.
func explain(app *kong.Application, err error) string {
	m := noValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	// The flag of the command given, or of a command above it (kong takes
	// those too); else the first of that name.
	nodes := []*kong.Node{}
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil {
		for n := pe.Context.Selected(); n != nil; n = n.Parent {
			nodes = append(nodes, n)
		}
	}
	var f *kong.Flag
	for _, n := range append(nodes, app.Node) {
		if f = findFlag(n, m[1], n != app.Node); f != nil {
			break
		}
	}
	if f == nil {
		return err.Error()
	}
	out := "--" + m[1] + " needs a value"
	if w := wants(f); strings.HasPrefix(w, "(") {
		out += " " + w
	} else {
		out += ": " + w
	}
	if kind := m[3]; kind == "long flag" || kind == "short flag" {
		out += fmt.Sprintf("; it was followed by the flag %s (a value that starts with '-' is written --%s=VALUE)", m[2], m[1])
	}
	return out
}

// findFlag finds the flag name of node, and below it unless only.
func findFlag(node *kong.Node, name string, only bool) *kong.Flag {
	for _, f := range node.Flags {
		if f.Name == name {
			return f
		}
	}
	for _, c := range node.Children {
		if f := findFlag(c, name, only); f != nil && !only {
			return f
		}
	}
	return nil
}

// wants says what a flag's value is, with the first clause of its help.
func wants(f *kong.Flag) string {
	var what string
	switch t := f.Target.Type(); {
	case f.Enum != "":
		what = "one of " + strings.Trim(strings.Join(f.EnumSlice(), ", "), ", ")
	case f.PlaceHolder == "RFC3339":
		what = "a time, RFC 3339, such as 2026-11-21T02:00:00Z"
	case t == reflect.TypeOf(time.Duration(0)):
		what = "a duration, such as 500ms, 30s, 5m or 1h"
	case f.PlaceHolder != "":
		what = f.PlaceHolder
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		what = "a whole number"
	}
	help := f.Help
	if i := strings.IndexAny(help, ".;:("); i >= 0 {
		help = help[:i]
	}
	if help = strings.TrimSpace(help); help != "" && !strings.HasPrefix(help, "${") {
		what = strings.TrimSpace(what + " (" + strings.ToLower(help[:1]) + help[1:] + ")")
	}
	return what
}

// usageHint names the help of the command a parse error was about.
func usageHint(name string, err error) string {
	var pe *kong.ParseError
	if errors.As(err, &pe) && pe.Context != nil && pe.Context.Selected() != nil {
		name = pe.Context.Selected().FullPath()
	}
	return fmt.Sprintf("Run '%s --help' for usage.", name)
}
