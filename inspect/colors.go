package inspect

import (
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// Colors paints states for a terminal. The zero value paints nothing: it
// is what scripts, pipes and NO_COLOR get.
type Colors struct{ On bool }

// ColorsFor paints only for a terminal, and never when NO_COLOR is set to
// anything (https://no-color.org) or TERM is "dumb".
func ColorsFor(w io.Writer) Colors {
	f, ok := w.(*os.File)
	return colorsFor(ok && term.IsTerminal(int(f.Fd())), os.Getenv)
}

func colorsFor(tty bool, getenv func(string) string) Colors {
	return Colors{On: tty && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"}
}

// ANSI colours, by what a state means.
const (
	green  = "32"
	red    = "31"
	yellow = "33"
	blue   = "34"
	faint  = "2"
)

// State paints a state (an activity's or a workflow's) by what it means:
// done green, failed red, running yellow, waiting blue, cancelled faint.
// s must already be inert.
func (c Colors) State(s string) string {
	if !c.On {
		return s
	}
	var code string
	switch s {
	case "COMPLETED":
		code = green
	case "FAILED", "TIMED_OUT":
		code = red
	case "RUNNING":
		code = yellow
	case "READY", "QUEUED", "REQUESTED":
		code = blue
	case "CANCELLED", "CANCELLED_RUNNING":
		code = faint
	default:
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Took is how every view writes a duration: rounded to 10 ms, so that
// `whimbrel run`, `status` and `list` say the same for one execution.
func Took(d time.Duration) string {
	return d.Round(10 * time.Millisecond).String()
}
