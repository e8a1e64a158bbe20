package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChoose checks each rule of store discovery, in order of precedence.
func TestChoose(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	deep := filepath.Join(project, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	found := filepath.Join(project, ".whimbrel", "state.db")
	touch(t, found)
	bare := filepath.Join(root, "bare")
	// A folder named like the file does not count.
	if err := os.MkdirAll(filepath.Join(bare, ".whimbrel", "state.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	explicit := filepath.Join(root, "x.db")

	for _, tc := range []struct {
		name, dir, flag, fallback string
		want                      string
	}{
		{"explicit --store wins over a found file", project, "sqlite:" + explicit, DefaultStore, "sqlite:" + explicit},
		{"explicit dynamodb wins over a found file", deep, "dynamodb", DefaultStore, "dynamodb"},
		{"found in the current folder", project, "", DefaultStore, "sqlite:" + found},
		{"found in a parent folder", deep, "", DefaultStore, "sqlite:" + found},
		{"nothing found: the default", root, "", DefaultStore, "dynamodb"},
		{"a folder is not a store", bare, "", DefaultStore, "dynamodb"},
		{"nothing found: whimbrel run's fallback, made absolute", bare, "", "sqlite:" + StateFile, "sqlite:" + filepath.Join(bare, ".whimbrel", "state.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.dir)
			got := StoreFlags{Store: tc.flag}.Choose(tc.fallback)
			if got.Store != tc.want {
				t.Errorf("Choose in %s with --store %q: got %q (%s), want %q", tc.dir, tc.flag, got.Store, got.Why, tc.want)
			}
			if got.Why == "" {
				t.Error("Choose gives no reason")
			}
			if got.Embedded() != (got.Store != "dynamodb") {
				t.Errorf("Embedded() = %v for %s", got.Embedded(), got.Store)
			}
		})
	}
}

// defaultsCLI takes the defaults that Vars provides, as the binaries' flags
// do.
type defaultsCLI struct {
	StoreFlags
	HeartbeatInterval time.Duration `name:"heartbeat-interval" default:"${default_heartbeat_interval}"`
	HeartbeatTimeout  time.Duration `name:"heartbeat-timeout" default:"${default_heartbeat_timeout}"`
	KillGrace         time.Duration `name:"kill-grace" default:"${default_kill_grace}"`
	// Own is a binary's own default, given in Program.Vars.
	Own time.Duration `name:"own" default:"${default_own}"`
}

func (c *defaultsCLI) Run() error { return nil }

// TestFlagDefaultsAreTheConstants: a flag default written as ${name} is the
// one definition of that value.
func TestFlagDefaultsAreTheConstants(t *testing.T) {
	var c defaultsCLI
	var out, errs bytes.Buffer
	const own = 90 * time.Second
	prog := Program{Name: "test", Vars: kong.Vars{"default_own": FlagDuration(own)}}
	if code := Run(prog, &c, nil, &out, &errs); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"--prefix", c.Prefix, state.DefaultTablePrefix},
		{"--store-timeout", c.StoreTimeout, dynamodb.DefaultCallTimeout},
		{"--store-attempt-timeout", c.StoreAttemptTimeout, dynamodb.DefaultAttemptTimeout},
		{"--heartbeat-interval", c.HeartbeatInterval, state.DefaultHeartbeatInterval},
		{"--heartbeat-timeout", c.HeartbeatTimeout, state.DefaultHeartbeatTimeout},
		{"--kill-grace", c.KillGrace, state.DefaultKillGrace},
		{"--own", c.Own, own},
	} {
		if f.got != f.want {
			t.Errorf("%s defaults to %v, want %v", f.name, f.got, f.want)
		}
	}
}

func TestFlagDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:        "5s",
		60 * time.Second:       "60s",
		90 * time.Second:       "90s",
		5 * time.Minute:        "5m",
		250 * time.Millisecond: "250ms",
	} {
		if got := FlagDuration(d); got != want {
			t.Errorf("FlagDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(FlagDuration(d)); err != nil || back != d {
			t.Errorf("FlagDuration(%v) = %q reads back as %v, %v", d, FlagDuration(d), back, err)
		}
	}
}
