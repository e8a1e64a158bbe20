package definition

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// A template in a shell script is where a value becomes code: the wrapper
// pastes the value into the script's text, and the shell then parses it,
// so a value holding `; rm -rf ~` or `$(…)` runs. A value reaches a
// script safely as one quoted word (the shquote filter) or from the
// environment (WHIMBREL_PARAM_<NAME>, or an env entry holding the
// template), where the shell expands it as data. The definition check
// warns of the unsafe pattern; see docs/params.md.

// Shquote writes s as exactly one word of the POSIX shell language,
// whatever it holds: inside single quotes, where the shell interprets
// nothing, each single quote of s written as: close the quotes, an
// escaped quote, open them again. The empty string is a pair of quotes. A
// NUL byte is refused: no argument of a command can hold one.
//
//	it's $HOME  →  'it'\''s $HOME'
func Shquote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("holds a NUL byte, which no command argument can carry")
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'", nil
}

// shells are the programs whose -c argument is a script in the POSIX
// shell language (or near enough that a pasted value runs as code).
var shells = []string{"sh", "bash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "ash", "yash", "posh", "busybox-sh"}

// shellScripts returns the indices of the arguments of argv that a shell
// runs as a script: the first operand after an option cluster holding c,
// for a shell program named anywhere in argv (so `env sh -c S`, `busybox
// sh -c S` and `timeout 60 bash -euc S` are found). The operands after the
// script are its $0, $1, …: data, not code.
func shellScripts(argv []string) []int {
	var out []int
	for s := 0; s < len(argv); s++ {
		if !slices.Contains(shells, path.Base(argv[s])) {
			continue
		}
		script := false
		i := s + 1
	options:
		for ; i < len(argv); i++ {
			a := argv[i]
			switch {
			case a == "--" || a == "-":
				i++
				break options
			case a == "-o" || a == "+o" || a == "-O" || a == "+O":
				i++ // the option's name follows
			case strings.HasPrefix(a, "--"):
				// A long option (--norc, --login) takes no operand here.
			case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
				if a[0] == '-' && strings.ContainsRune(a[1:], 'c') {
					script = true
				}
				if last := a[len(a)-1]; last == 'o' || last == 'O' {
					i++ // -eo pipefail: the option's name follows
				}
			default:
				break options
			}
		}
		if script && i < len(argv) {
			out = append(out, i)
			s = i // what follows the script is its operands
		}
	}
	return out
}

// warnShell warns of each template in command[i], a shell script, whose
// value is pasted into the code: a raw reference to an output or to a
// parameter that may hold any text (a string without an enum), and a
// shquoted one written inside the script's own quotes, where its quotes
// end the author's and the value is code again.
func (d *Workflow) warnShell(p *problems, name string, i int, line int) {
	segs, err := parseTemplate(d.Activities[name].Command[i])
	if err != nil {
		return // refused already
	}
	sh := path.Base(d.Activities[name].Command[0])
	for j := 0; j < i; j++ {
		if slices.Contains(shells, path.Base(d.Activities[name].Command[j])) {
			sh = path.Base(d.Activities[name].Command[j])
		}
	}
	var q quoting
	warned := map[string]bool{} // one warning for a reference repeated
	for _, sg := range segs {
		if sg.ref == nil {
			q.scan(sg.text)
			continue
		}
		r := *sg.ref
		if warned[r.String()+string(q.state)] {
			continue
		}
		warned[r.String()+string(q.state)] = true
		switch {
		case r.quoted() && q.state != unquoted:
			p.warn(line, "activity %q: command[%d]: {{ %s }} sits inside %s quotes in the script of %s -c: shquote makes its own quotes, and inside others the value runs as shell code; write it outside the quotes", name, i, r, q.state, sh)
		case r.quoted() || !d.anyText(r):
		default:
			p.warn(line, "activity %q: command[%d]: {{ %s }} is pasted raw into the script of %s -c, where a value runs as shell code: %s", name, i, r, sh, d.fix(r))
		}
	}
}

// anyText reports whether a reference may be any text: an output, or a
// parameter without a type other than string or an enum.
func (d *Workflow) anyText(r Ref) bool {
	if r.Kind == refItemIndex {
		return false // a number
	}
	if r.Kind != "params" {
		return true
	}
	decl := d.Params[r.Path[0]]
	return decl == nil || (decl.Type == "" || decl.Type == TypeString) && len(decl.Enum) == 0
}

// fix says what to write instead of a raw reference in a script.
func (d *Workflow) fix(r Ref) string {
	quoted := r
	quoted.Filters = append(slices.Clone(r.Filters), FilterShquote)
	if r.Kind == "params" {
		return fmt.Sprintf("write {{ %s }}, or read it from the environment as \"$%s\"", quoted, ParamEnv(r.Path[0]))
	}
	if r.Kind == refItem || r.Kind == refItemIndex {
		return fmt.Sprintf("write {{ %s }}, or read the element from the environment as \"$WHIMBREL_ITEM\"", quoted)
	}
	v := strings.ToUpper(r.Path[len(r.Path)-1])
	if !paramName.MatchString(v) || strings.Contains(v, "-") {
		v = "VALUE"
	}
	plain := r
	plain.Filters = nil
	return fmt.Sprintf("write {{ %s }}, or pass it by environment (env: {%s: \"{{ %s }}\"}) and write \"$%s\"", quoted, v, plain, v)
}

// quoting follows the quotes of a shell script's literal text, enough to
// tell whether a template sits inside quotes.
type quoting struct {
	state   quoteState
	escaped bool
}

type quoteState string

const (
	unquoted     quoteState = ""
	singleQuoted quoteState = "single"
	doubleQuoted quoteState = "double"
)

func (q *quoting) scan(s string) {
	for _, c := range s {
		switch {
		case q.escaped:
			q.escaped = false
		case q.state == singleQuoted:
			if c == '\'' {
				q.state = unquoted
			}
		case c == '\\':
			q.escaped = true
		case q.state == doubleQuoted:
			if c == '"' {
				q.state = unquoted
			}
		case c == '\'':
			q.state = singleQuoted
		case c == '"':
			q.state = doubleQuoted
		}
	}
}
