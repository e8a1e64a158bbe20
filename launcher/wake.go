package launcher

// Wake starts a pass at once, as a nudge does: it lists the READY index.
// A backend that supervises activities in the launcher's own process
// hands over what their advances readied instead (Handoff), which spares
// the listing.
func (l *Launcher) Wake() { l.wake() }
