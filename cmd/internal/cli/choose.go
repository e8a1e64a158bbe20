package cli

import (
	"os"
	"path/filepath"
	"strings"
)

// DefaultStore is the store when none is chosen and no embedded store is
// found.
const DefaultStore = "dynamodb"

// StateFile is where the embedded store lives, relative to the folder of a
// project: `whimbrel run` creates it, and every command finds it there.
const StateFile = ".whimbrel/state.db"

// Choice is the store a command uses, and why.
type Choice struct {
	Store string // "dynamodb" or "sqlite:/absolute/path"
	Why   string // for the debug log: "--store or WHIMBREL_STORE", "found …", "default"
}

// Embedded reports whether the choice is the embedded (SQLite) store.
func (c Choice) Embedded() bool { return strings.HasPrefix(c.Store, "sqlite:") }

// Choose applies the one rule every command follows: an explicit --store
// (or WHIMBREL_STORE) wins; otherwise the embedded store StateFile in the
// current folder or the nearest parent that has one (as git finds .git);
// otherwise fallback. An SQLite path is made absolute, so another process
// can use it.
func (f StoreFlags) Choose(fallback string) Choice {
	c := Choice{Store: f.Store, Why: "--store or WHIMBREL_STORE"}
	if c.Store == "" {
		if wd, err := os.Getwd(); err == nil {
			if found, ok := FindStateFile(wd); ok {
				c = Choice{Store: "sqlite:" + found, Why: "found " + found}
			}
		}
	}
	if c.Store == "" {
		c = Choice{Store: fallback, Why: "default: no --store, no WHIMBREL_STORE, no " + StateFile + " here or in a parent folder"}
	}
	if p, ok := strings.CutPrefix(c.Store, "sqlite:"); ok && p != "" {
		if abs, err := filepath.Abs(p); err == nil {
			c.Store = "sqlite:" + abs
		}
	}
	return c
}

// FindStateFile looks for StateFile in dir and then in each parent, and
// returns the first it finds. Only a regular file counts.
func FindStateFile(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		p := filepath.Join(dir, filepath.FromSlash(StateFile))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}
