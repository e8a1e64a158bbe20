package wrapper

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/whimbrel/whimbrel/process"
)

// CatchSignals starts catching the termination signals that the wrapper
// handles (those not ignored when it started) and returns their channel,
// for Config.Signals.
func CatchSignals() chan os.Signal {
	sigs := make(chan os.Signal, 32)
	notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	return sigs
}

// holdSignals catches the termination signals until the returned function
// is called, so that their default action cannot cut the final writes short.
func (r *run) holdSignals() (release func()) {
	if r.cfg.Inline {
		return func() {} // the supervisor's signals are its own
	}
	c := make(chan os.Signal, 4)
	notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for sig := range c {
			r.log.Debug("signal held until the outcome is recorded", "signal", sig)
		}
	}()
	return func() {
		signal.Stop(c)
		close(c)
		<-done
	}
}

// notify catches those of sigs that were not ignored when the wrapper
// started: catching a signal would make the command's disposition the
// default one, and an ignored signal must stay ignored in it.
func notify(c chan<- os.Signal, sigs ...syscall.Signal) {
	for _, s := range sigs {
		if !process.Ignored(s) {
			signal.Notify(c, s)
		}
	}
}

// pendingSignal returns the first signal waiting in c, or 0.
func pendingSignal(c chan os.Signal) syscall.Signal {
	select {
	case sig := <-c:
		if s, ok := sig.(syscall.Signal); ok {
			return s
		}
	default:
	}
	return 0
}
