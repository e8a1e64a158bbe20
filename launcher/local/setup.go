package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
)

// exitedTimeout bounds what the launcher records of one child's exit.
const exitedTimeout = time.Minute

// NewLauncher returns a launcher of cfg with b as its local backend: b's
// wrappers are handed nl's address to wake the launcher when they ready
// another activity (nl nil: no nudges), and the launcher is told of each
// of b's children that exits (launcher.Launcher.Exited), so that one that
// never claimed its activity fails it at once and, under a cap, its slot
// is free at once.
func NewLauncher(st launcher.Store, cfg launcher.Config, b *Backend, nl *nudge.Listener) *launcher.Launcher {
	cfg.Backends = maps.Clone(cfg.Backends) // the caller's map stays as it was
	if cfg.Backends == nil {
		cfg.Backends = map[string]launcher.Backend{}
	}
	cfg.Backends[definition.LaunchLocal] = b
	if nl != nil {
		cfg.Nudge = nl.C()
		b.Env = append(os.Environ(), nudge.Env+"="+nl.Addr())
		announce(st, nl, cfg.Logger)
	}
	if b.Supervise == SuperviseInline && b.Store == nil {
		b.Store, _ = st.(state.Store)
	}
	l := launcher.New(st, cfg)
	// An activity supervised inline that readied dependents hands them
	// to the launcher's next pass, which starts at once, in process.
	b.handoff = l.Handoff
	b.wakeList = l.Wake
	b.Exited = func(j launcher.Job, exit error) {
		ctx, cancel := context.WithTimeout(context.Background(), exitedTimeout)
		defer cancel()
		l.Exited(ctx, j, exit)
	}
	return l
}

// FindWrapper returns the whimbrel-run beside the running binary, or the one
// on PATH.
func FindWrapper() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "whimbrel-run")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("whimbrel-run")
	if err != nil {
		return "", errors.New("whimbrel-run is neither beside this binary nor on PATH: install it, or name it with --wrapper")
	}
	return p, nil
}

// WrapperOr is the whimbrel-run binary a --wrapper flag names, or the one
// FindWrapper finds when it names none.
func WrapperOr(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return FindWrapper()
}

// WrapperFor is the whimbrel-run binary for a --wrapper flag under a
// --supervise mode. Under inline a missing whimbrel-run is no error: only
// an activity that asks for the Simple Lambda API needs one, and Launch
// fails that activity alone, naming what to do (errNoWrapper).
func WrapperFor(flag, supervise string) (string, error) {
	w, err := WrapperOr(flag)
	if err != nil && supervise == SuperviseInline {
		return "", nil
	}
	return w, err
}

// errNoWrapper fails the launch of an activity that needs a whimbrel-run
// process when none was found.
var errNoWrapper = errors.New("this activity asks for WHIMBREL_API=simple, which only a whimbrel-run process serves, " +
	"and whimbrel-run is neither beside this binary nor on PATH: put whimbrel-run there, or name it with --wrapper")

// CheckLogDir makes sure local activities' logs can be written in dir
// (the --log-dir flag), creating it if missing.
func CheckLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--log-dir %s cannot be created: %w", dir, cause(err))
	}
	f, err := os.CreateTemp(dir, ".whimbrel-launcher-check-*")
	if err != nil {
		return fmt.Errorf("--log-dir %s is not writable: %w", dir, cause(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

// cause drops the path an *os.PathError repeats.
func cause(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
