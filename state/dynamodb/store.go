// Package dynamodb is the state.Store on Amazon DynamoDB, through
// aws-sdk-go-v2. Every state change is one conditional UpdateItem whose
// failure returns the item as it was (ReturnValuesOnConditionCheckFailure),
// translated here into a *state.ConflictError; no SDK type leaves this
// package.
package dynamodb

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// API lists the DynamoDB calls the Store makes; *dynamodb.Client satisfies
// it, and tests may wrap it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// Options configure a Store.
type Options struct {
	// Prefix is prepended to every table name (default DefaultPrefix).
	Prefix string
	// Logger receives the Store's and the SDK's log lines (default: none).
	Logger hclog.Logger
	// Capacity, when set, asks DynamoDB for the capacity each call consumed
	// and reports it, from several goroutines at once (the shards of the
	// state index are read in parallel). Benchmarks and cost tests use it.
	Capacity func(Capacity)
	// TableWait bounds how long Install waits for a table or an index to
	// become active (default DefaultTableWait).
	TableWait time.Duration
	// CallTimeout bounds every call, the SDK's retries inside (default
	// DefaultCallTimeout).
	CallTimeout time.Duration
	// AttemptTimeout bounds each HTTP attempt of a client Open builds
	// (default DefaultAttemptTimeout).
	AttemptTimeout time.Duration
	// Endpoint names where DynamoDB is reached, for messages (Open fills
	// it in from the environment).
	Endpoint string
	// Observe, when set, is told of every call to DynamoDB once it has
	// ended, from several goroutines at once; it must not block. Metrics
	// use it.
	Observe func(Call)
}

// Capacity is what one call consumed, in read or write units.
type Capacity struct {
	Op      string             // e.g. "Heartbeat"
	Total   float64            // table and indexes together
	Table   float64            // the table alone
	Indexes map[string]float64 // by index name
}

// Store is the state.Store on DynamoDB.
type Store struct {
	api       API
	prefix    string
	log       hclog.Logger
	capacity  func(Capacity)
	tableWait time.Duration
	undecoded *attr.Reporter
	adopt     adoption
}

var (
	_ state.Store     = (*Store)(nil)
	_ state.Installer = (*Store)(nil)
)

// New returns a Store that talks to DynamoDB through api.
func New(api API, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.TableWait <= 0 {
		opts.TableWait = DefaultTableWait
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Endpoint == "" {
		opts.Endpoint = "DynamoDB's endpoint"
	}
	api = &bounded{api: api, timeout: opts.CallTimeout, endpoint: opts.Endpoint, prefix: opts.Prefix, observe: opts.Observe}
	return &Store{api: api, prefix: opts.Prefix, log: opts.Logger, capacity: opts.Capacity, tableWait: opts.TableWait,
		undecoded: attr.NewReporter(opts.Logger)}
}

// Open returns a Store on a client built from the SDK's default chain
// (or, built with the whimbrel_leanaws tag, from the environment and the
// container's and instance's credentials only): region, credentials and
// endpoint, including AWS_ENDPOINT_URL_DYNAMODB for a local endpoint.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	cfg, err := loadConfig(ctx, opts.Logger, opts.AttemptTimeout)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" {
		return nil, &state.ConfigError{Msg: "no AWS region is set for the dynamodb store: " + reachHelp}
	}
	if opts.Endpoint == "" {
		opts.Endpoint = endpointOf(cfg.Region)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local answers errors with bodies whose CRC32 the SDK
		// rejects; a custom endpoint is where that happens.
		o.DisableValidateResponseChecksum = localEndpoint()
	})
	return New(client, opts), nil
}

var getenv = os.Getenv

func localEndpoint() bool {
	return os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
}

// Close releases nothing: the SDK's client needs no closing. It makes the
// Store an io.Closer, like the SQLite store.
func (st *Store) Close() error { return nil }

// Prefix returns the table prefix.
func (st *Store) Prefix() string { return st.prefix }

func (st *Store) table(base string) *string { return aws.String(st.prefix + base) }

func (st *Store) returnCapacity() types.ReturnConsumedCapacity {
	if st.capacity == nil {
		return types.ReturnConsumedCapacityNone
	}
	return types.ReturnConsumedCapacityIndexes
}

func (st *Store) report(op string, ccs ...types.ConsumedCapacity) {
	if st.capacity == nil {
		return
	}
	c := Capacity{Op: op, Indexes: map[string]float64{}}
	for _, cc := range ccs {
		c.Total += aws.ToFloat64(cc.CapacityUnits)
		if cc.Table != nil {
			c.Table += aws.ToFloat64(cc.Table.CapacityUnits)
		}
		for name, ix := range cc.GlobalSecondaryIndexes {
			c.Indexes[name] += aws.ToFloat64(ix.CapacityUnits)
		}
	}
	st.capacity(c)
}

func reportOne(cc *types.ConsumedCapacity) []types.ConsumedCapacity {
	if cc == nil {
		return nil
	}
	return []types.ConsumedCapacity{*cc}
}
