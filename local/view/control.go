package view

import (
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/local"
	"github.com/whimbrel/whimbrel/state"
)

// shown is an activity's state as a line shows it: SKIPPED for a skipped
// activity's moves (it never ran), CANCELLED (rule) for a trigger rule
// that could not be met, the state painted otherwise.
func (v *people) shown(e local.Event) string {
	s := inert.String(e.Shown)
	switch e.Shown {
	case "":
		s = v.Colors.Activity(e.ActivityState())
	case "CANCELLED (rule)":
		s = v.Colors.Activity(state.Cancelled) + " (rule)  " + inert.String(e.Reason)
	}
	if e.Finally {
		s += " (finally)"
	}
	return s
}
