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

	"github.com/whimbrel/whimbrel/internal/inert"
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
	Store  string `name:"store" env:"WHIMBREL_STORE" placeholder:"dynamodb|sqlite:PATH" help:"Where the state lives: 'dynamodb' (region, credentials and endpoint from the AWS SDK's default chain, e.g. AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB), or 'sqlite:PATH' (one local file, shared by every process on this machine). Default: the embedded store .whimbrel/state.db in this folder or the nearest parent that has one, else dynamodb (whimbrel run: else a new .whimbrel/state.db here)."`
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

// Open connects to the chosen store, DefaultStore if none is.
func (f StoreFlags) Open(ctx context.Context, log hclog.Logger) (Store, error) {
	return f.OpenOr(ctx, log, DefaultStore)
}

// Resolved is the chosen store (see Choose), or fallback, in a form
// another process can use: an SQLite path is made absolute.
func (f StoreFlags) Resolved(fallback string) string {
	return f.Choose(fallback).Store
}

// OpenOr connects to the chosen store (see Choose), or to fallback if none
// is chosen or found. It logs the store and why at debug level.
func (f StoreFlags) OpenOr(ctx context.Context, log hclog.Logger, fallback string) (Store, error) {
	return f.OpenChoice(ctx, log, f.Choose(fallback))
}

// OpenChoice connects to the store c names.
func (f StoreFlags) OpenChoice(ctx context.Context, log hclog.Logger, c Choice) (Store, error) {
	if err := checkPrefix(f.Prefix); err != nil {
		return nil, err
	}
	log.Debug("store chosen", "store", c.Store, "why", c.Why, "prefix", f.Prefix)
	switch store := c.Store; {
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
	return nil, &UsageError{Msg: fmt.Sprintf("store %q is not one Whimbrel knows: set WHIMBREL_STORE (or --store) to 'dynamodb' or 'sqlite:PATH'", c.Store)}
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
	stop := startProfile()
	code := Run(prog, cli, os.Args[1:], os.Stdout, os.Stderr, bindings...)
	stop()
	os.Exit(code)
}
