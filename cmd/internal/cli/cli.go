// Package cli holds what Whimbrel's binaries share on the command
// line: choosing the store from flags or the environment, building the
// logger, the version, and running a kong CLI to an exit code.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/internal/inert"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Version is set at build time with -ldflags '-X …/internal/cli.Version=…'.
var Version = "dev"

// Exit codes of the operator commands and daemons (the README's table).
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
		"version":                       Version,
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

// Program names a binary and the exit codes of its own failures.
type Program struct {
	Name        string
	Description string
	UsageExit   int // for a wrong command line (default ExitUsage)
	FailureExit int // for a command that failed (default ExitFailure)
	// StoreExit is for a store that could not be used (state.ErrUnavailable):
	// default ExitStore, or FailureExit when that is set.
	StoreExit int
	// Vars adds to Vars the binary's own values for its flag tags, such
	// as its components' defaults (see FlagDuration).
	Vars kong.Vars
}

// ExitError makes a command exit with Code. With an empty Msg nothing is
// printed: the command has said what there was to say.
type ExitError struct {
	Code int
	Msg  string
}

func (e *ExitError) Error() string { return e.Msg }

// ExitCode returns the status to exit with.
func (e *ExitError) ExitCode() int { return e.Code }

// Run parses args into the grammar cli, runs the selected command and
// returns the exit code. Errors are printed on stderr as "NAME: error: …".
// Bindings are passed to the commands' Run methods.
func Run(prog Program, cli any, args []string, stdout, stderr io.Writer, bindings ...any) int {
	if prog.UsageExit == 0 {
		prog.UsageExit = ExitUsage
	}
	if prog.StoreExit == 0 {
		prog.StoreExit = prog.FailureExit
	}
	if prog.FailureExit == 0 {
		prog.FailureExit = ExitFailure
	}
	if prog.StoreExit == 0 {
		prog.StoreExit = ExitStore
	}
	name := prog.Name
	exit := -1
	parser, err := kong.New(cli,
		kong.Name(name),
		kong.Description(prog.Description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exit = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		Vars().CloneWith(prog.Vars),
		kong.Bind(bindings...),
	)
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		return prog.FailureExit
	}
	kctx, err := parser.Parse(args)
	if exit >= 0 { // --help or --version
		return exit
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return prog.UsageExit
	}
	kctx.Stdout, kctx.Stderr = stdout, stderr
	if err := kctx.Run(bindings...); err != nil {
		var ce interface{ ExitCode() int }
		var ue *UsageError
		if msg := strings.TrimSpace(err.Error()); msg != "" {
			// Errors quote ids and output from the store: keep their
			// lines, but nothing a terminal would act on.
			fmt.Fprintf(stderr, "%s: error: %s\n", name, strings.Join(inert.Lines(msg), "\n"))
		}
		switch {
		case errors.As(err, &ue):
			return prog.UsageExit
		case errors.As(err, &ce):
			return ce.ExitCode()
		case errors.Is(err, state.ErrUnavailable):
			return prog.StoreExit
		}
		return prog.FailureExit
	}
	return ExitOK
}

// Main runs a binary's CLI with the process's arguments and streams.
func Main(prog Program, cli any, bindings ...any) {
	os.Exit(Run(prog, cli, os.Args[1:], os.Stdout, os.Stderr, bindings...))
}
