// Package cli holds what Whimbrel's four binaries share on the command
// line: choosing the store from flags or the environment, building the
// logger, the version, and running a kong CLI to an exit code.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
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

// StoreFlags choose the store every binary talks to.
type StoreFlags struct {
	Store  string `name:"store" env:"WHIMBREL_STORE" placeholder:"dynamodb|sqlite:PATH" help:"Where the state lives: 'dynamodb' (region, credentials and endpoint from the AWS SDK's default chain, e.g. AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB), or 'sqlite:PATH' (one local file, shared by every process on this machine). Default: dynamodb (whimbrel run: sqlite:.whimbrel/state.db)."`
	Prefix string `name:"prefix" env:"WHIMBREL_TABLE_PREFIX" default:"whimbrel_" help:"Prefix of every table name."`
	// Every DynamoDB call is bounded, so a silent endpoint costs a bounded
	// wait, never a hang.
	StoreTimeout        time.Duration `name:"store-timeout" env:"WHIMBREL_STORE_TIMEOUT" default:"15s" help:"Longest wait for one DynamoDB call, the SDK's retries included; then a command fails and a daemon tries again at its next pass."`
	StoreAttemptTimeout time.Duration `name:"store-attempt-timeout" env:"WHIMBREL_STORE_ATTEMPT_TIMEOUT" default:"5s" help:"Longest wait for one HTTP attempt to DynamoDB (connecting included), within --store-timeout."`
}

// Store is what a command gets from Open: the state, the Simple Lambda
// API's items, the means to install its tables, and Close, which a command
// calls when it is done.
type Store interface {
	state.Store
	state.Inbox
	state.Installer
	io.Closer
}

// DefaultStore is the store when none is chosen.
const DefaultStore = "dynamodb"

// Open connects to the chosen store, DefaultStore if none is.
func (f StoreFlags) Open(ctx context.Context, log hclog.Logger) (Store, error) {
	return f.OpenOr(ctx, log, DefaultStore)
}

// Resolved is the chosen store, or fallback, in a form another process can
// use: an SQLite path is made absolute.
func (f StoreFlags) Resolved(fallback string) string {
	s := f.Store
	if s == "" {
		s = fallback
	}
	if p, ok := strings.CutPrefix(s, "sqlite:"); ok && p != "" {
		if abs, err := filepath.Abs(p); err == nil {
			return "sqlite:" + abs
		}
	}
	return s
}

// OpenOr connects to the chosen store, or to fallback if none is chosen.
func (f StoreFlags) OpenOr(ctx context.Context, log hclog.Logger, fallback string) (Store, error) {
	if err := checkPrefix(f.Prefix); err != nil {
		return nil, err
	}
	store := f.Resolved(fallback)
	switch {
	case store == "dynamodb":
		if f.StoreTimeout < 0 || f.StoreAttemptTimeout < 0 {
			return nil, &UsageError{Msg: "--store-timeout and --store-attempt-timeout must not be negative"}
		}
		return dynamodb.Open(ctx, dynamodb.Options{Prefix: f.Prefix, Logger: log.Named("dynamodb"),
			CallTimeout: f.StoreTimeout, AttemptTimeout: f.StoreAttemptTimeout})
	case strings.HasPrefix(store, "sqlite:"):
		path := strings.TrimPrefix(store, "sqlite:")
		if path == "" {
			return nil, &UsageError{Msg: "store 'sqlite:' names no file: use sqlite:PATH, such as sqlite:.whimbrel/state.db"}
		}
		return sqlite.Open(path, sqlite.Options{Prefix: f.Prefix, Logger: log.Named("sqlite")})
	}
	return nil, &UsageError{Msg: fmt.Sprintf("store %q is not one Whimbrel knows: set WHIMBREL_STORE (or --store) to 'dynamodb' or 'sqlite:PATH'", store)}
}

func checkPrefix(p string) error {
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return &UsageError{Msg: fmt.Sprintf("table prefix %q may hold only letters, digits, '_', '-' and '.' (DynamoDB's rule for table names)", p)}
		}
	}
	if len(p) > 200 {
		return &UsageError{Msg: fmt.Sprintf("table prefix %q is too long: keep it under 200 characters", p)}
	}
	return nil
}

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

// Program names a binary and the exit codes of its own failures.
type Program struct {
	Name        string
	Description string
	UsageExit   int // for a wrong command line (default ExitUsage)
	FailureExit int // for a command that failed (default ExitFailure)
	// StoreExit is for a store that could not be used (state.ErrUnavailable):
	// default ExitStore, or FailureExit when that is set.
	StoreExit int
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
		kong.Vars{"version": Version},
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
			fmt.Fprintf(stderr, "%s: error: %s\n", name, msg)
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
