// Package cli holds what Whimbrel's binaries share on the command
// line: choosing the store from flags or the environment, building the
// logger, the version, and running a kong CLI to an exit code.
package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Version is set at build time with -ldflags '-X …/internal/cli.Version=…'.
var Version = "dev"

// Exit codes of the operator commands and daemons (docs/cli.md#exit-codes).
const (
	ExitOK      = 0
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // the command line was wrong
	// ExitStore: the store could not be used as configured: it did not
	// answer within --store-timeout, a table is not installed, or no
	// region or credentials are set. Trying again later may succeed.
	ExitStore = 3
)

// LogFlags configure the logger. Logs go to stderr.
type LogFlags struct {
	LogLevel  string `name:"log-level" env:"WHIMBREL_LOG_LEVEL" default:"info" enum:"trace,debug,info,warn,error" help:"Least severe log level shown: ${enum}."`
	LogFormat string `name:"log-format" env:"WHIMBREL_LOG_FORMAT" default:"text" enum:"text,json" help:"Log format: text for people, json for CloudWatch and friends."`
}

// Logger builds the one logger of a binary.
func (f LogFlags) Logger(name string, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(f.LogLevel),
		Output:     w,
		JSONFormat: f.LogFormat == "json",
	})
}

// UsageError is a mistake on the command line or in the environment; the
// binaries exit with ExitUsage for it.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Vars are the values that flag tags refer to as ${name}: the version, and
// the defaults of the contract (package state) and of the store, so that
// a flag's default is the one definition rather than a copy of it.
func Vars() kong.Vars {
	return kong.Vars{
		"version":                       Version + " (" + Stores + dynamodb.ConfigChain + ")",
		"default_table_prefix":          state.DefaultTablePrefix,
		"default_store_timeout":         FlagDuration(dynamodb.DefaultCallTimeout),
		"default_store_attempt_timeout": FlagDuration(dynamodb.DefaultAttemptTimeout),
		"default_heartbeat_interval":    FlagDuration(state.DefaultHeartbeatInterval),
		"default_heartbeat_timeout":     FlagDuration(state.DefaultHeartbeatTimeout),
		"default_kill_grace":            FlagDuration(state.DefaultKillGrace),
	}
}

// FlagDuration writes d for a flag's default as it reads in --help: whole
// minutes above one as "5m", other whole seconds as "60s", rather than Go's
// "5m0s" and "1m0s".
func FlagDuration(d time.Duration) string {
	if d > time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}
