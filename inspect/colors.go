package inspect

import (
	"io"
	"os"
	"time"

	"golang.org/x/term"

	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
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

// activityColors paints each activity state by what it means: done green,
// ended badly red, running yellow, waiting blue, cancelled faint. Every
// state has one (a test walks state.ActivityStates).
var activityColors = map[state.ActivityState]string{
	state.Requested:        blue,
	state.Ready:            blue,
	state.Queued:           blue,
	state.Preparing:        blue,
	state.Running:          yellow,
	state.Completed:        green,
	state.Failed:           red,
	state.TimedOut:         red,
	state.Cancelled:        faint,
	state.CancelledRunning: faint,
}

// workflowColors paints each workflow state as activityColors paints the
// activity state of the same meaning.
var workflowColors = map[state.WorkflowState]string{
	state.WorkflowRequested: blue,
	state.WorkflowRunning:   yellow,
	state.WorkflowCompleted: green,
	state.WorkflowFailed:    red,
	state.WorkflowCancelled: faint,
}

// Activity is an activity's state as a person reads it: made inert and
// painted by what it means. A state that is not one of the contract's (a
// raw item's) is shown unpainted.
func (c Colors) Activity(s state.ActivityState) string {
	return c.paint(activityColors[s], inert.String(string(s)))
}

// Workflow is a workflow's state as a person reads it, as Activity.
func (c Colors) Workflow(s state.WorkflowState) string {
	return c.paint(workflowColors[s], inert.String(string(s)))
}

// paint wraps shown in the colour code, when colours are on and the state
// has a colour.
func (c Colors) paint(code, shown string) string {
	if !c.On || code == "" {
		return shown
	}
	return "\x1b[" + code + "m" + shown + "\x1b[0m"
}

// Took is how every view writes a duration: rounded to 10 ms, so that
// `whimbrel run`, `status` and `list` say the same for one execution.
func Took(d time.Duration) string {
	return d.Round(10 * time.Millisecond).String()
}
