package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/simpleapi/dynamoinbox"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// StoreFlags choose the store every binary talks to.
type StoreFlags struct {
	Store  string `name:"store" env:"WHIMBREL_STORE" placeholder:"dynamodb|sqlite:PATH" help:"Where the state lives: 'dynamodb' (region, credentials and endpoint from the AWS SDK's default chain, e.g. AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB), or 'sqlite:PATH' (one local file, shared by every process on this machine). Default: the embedded store .whimbrel/state.db in this folder or the nearest parent that has one, else dynamodb (whimbrel run: else a new .whimbrel/state.db here)."`
	Prefix string `name:"prefix" env:"WHIMBREL_TABLE_PREFIX" default:"${default_table_prefix}" help:"Prefix of every table name."`
	// Every DynamoDB call is bounded, so a silent endpoint costs a bounded
	// wait, never a hang.
	StoreTimeout        time.Duration `name:"store-timeout" env:"WHIMBREL_STORE_TIMEOUT" default:"${default_store_timeout}" help:"Longest wait for one DynamoDB call, the SDK's retries included; then a command fails and a daemon tries again at its next pass."`
	StoreAttemptTimeout time.Duration `name:"store-attempt-timeout" env:"WHIMBREL_STORE_ATTEMPT_TIMEOUT" default:"${default_store_attempt_timeout}" help:"Longest wait for one HTTP attempt to DynamoDB (connecting included), within --store-timeout."`
	// Hooks, set by a command that serves metrics before it opens the
	// store, are told of the DynamoDB store's calls and what they cost
	// (the embedded store has none). They are funcs, not a metrics type,
	// so that a binary without metrics (whimbrel-run) links no metrics
	// library.
	Hooks dynamodb.Hooks `kong:"-"`
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
		st, err := dynamodb.Open(ctx, dynamodb.Options{Prefix: f.Prefix, Logger: log.Named("dynamodb"),
			CallTimeout: f.StoreTimeout, AttemptTimeout: f.StoreAttemptTimeout,
			Observe: f.Hooks.Observe, Capacity: f.Hooks.Capacity})
		if err != nil {
			return nil, err
		}
		return &Dynamo{st, dynamoinbox.New(st)}, nil
	case strings.HasPrefix(store, "sqlite:"):
		path := strings.TrimPrefix(store, "sqlite:")
		if path == "" {
			return nil, &UsageError{Msg: "store 'sqlite:' names no file: use sqlite:PATH, such as sqlite:.whimbrel/state.db"}
		}
		return openSQLite(path, f.Prefix, log)
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
