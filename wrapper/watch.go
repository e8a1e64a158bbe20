package wrapper

import "github.com/whimbrel/whimbrel/state"

// Watcher is a store that can say at once when another process changes an
// activity's state (the embedded store: state/sqlite's Store).
type Watcher interface {
	WatchActivity(key state.ActivityKey) (changed <-chan struct{}, stop func(), err error)
}

// watching is the wrapper's watch of its activity (Config.Watcher): a
// nil changed never delivers.
type watching struct {
	changed <-chan struct{}
	stop    func()
}

// watch starts watching the activity, if the store can; without a watch
// a cancellation is heard at the next heartbeat, as on DynamoDB.
func (r *run) watch() watching {
	if r.cfg.Watcher == nil {
		return watching{stop: func() {}}
	}
	changed, stop, err := r.cfg.Watcher.WatchActivity(r.cfg.Key)
	if err != nil {
		r.log.Debug("not watching the activity; a cancellation is heard at the next heartbeat", "error", err)
		return watching{stop: func() {}}
	}
	return watching{changed: changed, stop: stop}
}
