package view

import (
	"io"
	"os"

	"golang.org/x/term"

	"github.com/whimbrel/whimbrel/inspect"
)

// For chooses how to show a run on out: JSON if asked; else, when out is
// a terminal, a tree redrawn in place and cut to its width; else lines.
// States are coloured as inspect.ColorsFor says.
func For(out io.Writer, json bool) Options {
	o := Options{Out: out, JSON: json, Colors: inspect.ColorsFor(out)}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		o.TTY = true
		if w, _, err := term.GetSize(int(f.Fd())); err == nil {
			o.Width = w
		}
	}
	return o
}
