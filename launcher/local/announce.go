package local

import (
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/nudge"
)

// Announcer is a store that tells the launchers of its machine at once
// when a start readies activities (the embedded store, whose users are
// all on one machine): the launcher at addr hears of every start until
// stop is called.
type Announcer interface {
	AnnounceLauncher(addr string) (stop func(), err error)
}

// announce has st's starts nudge the launcher listening on nl, where st
// can, for as long as nl is open: the launcher's first pass then finds a
// whole start instead of waiting for its next listing.
func announce(st any, nl *nudge.Listener, log hclog.Logger) {
	a, ok := st.(Announcer)
	if !ok {
		return
	}
	stop, err := a.AnnounceLauncher(nl.Addr())
	if err != nil {
		if log != nil {
			log.Debug("starts will not wake this launcher; it lists on its interval", "error", err)
		}
		return
	}
	nl.OnClose(stop)
}
