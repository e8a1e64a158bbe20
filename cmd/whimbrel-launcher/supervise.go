package main

import "time"

// inlineStopWithin bounds how long a stopping launcher waits for the
// activities it supervises inline to record their outcome after SIGTERM
// before it kills their commands.
const inlineStopWithin = time.Minute

// waitInline waits for the activities supervised inline to end: they live
// in this process, so a single pass (--once) stays until they have.
func (b *backends) waitInline() {
	if b.local != nil {
		b.local.WaitInline()
	}
}

// stopInline stops the activities supervised inline when the launcher
// stops: their commands get SIGTERM and their outcomes are recorded, as a
// docker stop would have them.
func (b *backends) stopInline() {
	if b.local != nil {
		b.local.Stop(inlineStopWithin)
	}
}
