package view

import (
	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/local"
)

// child names the child workflow an activity runs, so that the person at
// the terminal can follow it with whimbrel status.
func child(e local.Event) string {
	if e.Child == "" {
		return ""
	}
	return "  child " + inert.String(e.Child)
}
