package launcher

// Wake starts a pass at once, as a nudge does: a backend that supervises
// activities in the launcher's own process calls it when one readied
// dependents.
func (l *Launcher) Wake() { l.wake() }
