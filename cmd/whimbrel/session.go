package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/state"
)

// session is an operator command's store, opened by open.
type session struct {
	ctx    context.Context
	st     cli.Store
	choice cli.Choice
	log    hclog.Logger
	close  func()
}

// Access says what a command does to the store.
type access int

const (
	reads  access = iota // only reads: an embedded store must exist
	writes               // writes: an embedded store gets its tables, as whimbrel run does
)

// open is what every operator command does first: choose the store by the
// one rule (cli.StoreFlags.Choose), open it, and on the embedded store
// make sure its tables exist (a command that only reads refuses a file
// that is not there rather than create an empty one).
func open(g *Globals, k *kong.Context, f cli.StoreFlags, a access) (*session, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	log := g.Logger("whimbrel", k.Stderr)
	choice := f.Choose(cli.DefaultStore)
	if path, ok := strings.CutPrefix(choice.Store, "sqlite:"); ok && a == reads && path != "" {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			stop()
			return nil, &state.ConfigError{Msg: fmt.Sprintf("the embedded store %s does not exist: check --store/WHIMBREL_STORE, or run a workflow first (whimbrel run FILE creates it)", path), Err: err}
		}
	}
	st, err := f.OpenChoice(ctx, log, choice)
	if err != nil {
		stop()
		return nil, err
	}
	if choice.Embedded() {
		// Creating what is missing is cheap and idempotent on SQLite; it
		// spares a "no such table" on a file an older version made.
		if _, err := st.Install(ctx, false); err != nil {
			st.Close()
			stop()
			return nil, fmt.Errorf("install the embedded store %s: %w", strings.TrimPrefix(choice.Store, "sqlite:"), err)
		}
	}
	return &session{ctx: ctx, st: st, choice: choice, log: log, close: func() { st.Close(); stop() }}, nil
}

// withSession opens the store as open does, runs fn, and closes it.
func withSession(g *Globals, k *kong.Context, f cli.StoreFlags, a access, fn func(*session) error) error {
	se, err := open(g, k, f, a)
	if err != nil {
		return err
	}
	defer se.close()
	return fn(se)
}

// where names the store and prefix, for errors that found nothing.
func (s *session) where(prefix string) string {
	return fmt.Sprintf("store %s, table prefix %q", s.choice.Store, prefix)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
