// Package dynamodb is the state.Store on Amazon DynamoDB, through
// aws-sdk-go-v2. Every state change is one conditional UpdateItem whose
// failure returns the item as it was (ReturnValuesOnConditionCheckFailure),
// translated here into a *state.ConflictError; no SDK type leaves this
// package.
package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/cenkalti/backoff/v4"
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

// Open returns a Store on a client built from the SDK's default chain:
// region, credentials and endpoint come from the environment and shared
// config, including AWS_ENDPOINT_URL_DYNAMODB for a local endpoint.
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

// LoadConfig loads the SDK's configuration from its default chain, with
// the SDK's own log lines routed to log at debug level.
func LoadConfig(ctx context.Context, log hclog.Logger) (aws.Config, error) {
	return loadConfig(ctx, log, DefaultAttemptTimeout)
}

// loadConfig is LoadConfig with each HTTP attempt (connecting included)
// bounded by attempt.
func loadConfig(ctx context.Context, log hclog.Logger, attempt time.Duration) (aws.Config, error) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sdkLog := log.Named("aws")
	httpClient := awshttp.NewBuildableClient().WithTimeout(attempt).
		WithDialerOptions(func(d *net.Dialer) { d.Timeout = attempt })
	cfg, err := config.LoadDefaultConfig(ctx, config.WithHTTPClient(httpClient), config.WithLogger(logging.LoggerFunc(
		func(c logging.Classification, format string, v ...interface{}) {
			// The SDK's own warnings are about transport details; they
			// belong in our log at debug level, never on the wrapped
			// command's stderr.
			sdkLog.Debug(fmt.Sprintf(format, v...), "classification", string(c))
		})))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	return cfg, nil
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

// --- workflows

// CreateWorkflow implements state.Store, without transactions: a
// transaction costs twice the write units of each item it writes, on the
// table and on every index. The request and the workflow item go first,
// each one conditional PutItem that makes a repeated request answer with
// the first execution; then the activity and dependency items, each put
// only if absent, in parallel, in batches of batchItems. Before each batch
// after the first the workflow is read again (one consistent read), and
// nothing more is added once it has left REQUESTED. A retry after a
// partial write completes it without touching what exists; a creator that
// dies half-way leaves a REQUESTED workflow, which nobody launches and the
// monitor fails once stale, cancelling what it holds.
func (st *Store) CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error {
	if err := attr.CheckNewWorkflow(w); err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	if w.Request != nil {
		err := st.putGuarded(ctx, w, &dynamodb.PutItemInput{
			TableName:           st.table(TableWorkflowRequest),
			Item:                toAVItem(attr.EncodeRequest(w.Request)),
			ConditionExpression: aws.String("attribute_not_exists(workflow_request_id) OR workflow_exec_id = :e"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":e": avS(w.Exec.WorkflowExecID),
			},
		})
		if err != nil {
			return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
		}
	}
	err := st.putGuarded(ctx, w, &dynamodb.PutItemInput{
		TableName:                 st.table(TableWorkflowExec),
		Item:                      toAVItem(workflowStamps.stamped(attr.EncodeWorkflow(&w.Exec))),
		ConditionExpression:       aws.String("attribute_not_exists(workflow_exec_id) OR #s = :r"),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": avS(string(state.WorkflowRequested))},
	})
	if err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}

	var rest []*dynamodb.PutItemInput
	for i := range w.Activities {
		rest = append(rest, &dynamodb.PutItemInput{
			TableName:           st.table(TableActivityExec),
			Item:                toAVItem(withShard(attr.EncodeActivity(&w.Activities[i]))),
			ConditionExpression: aws.String("attribute_not_exists(activity_exec_id)"),
		})
	}
	for i := range w.Dependencies {
		rest = append(rest, &dynamodb.PutItemInput{
			TableName:           st.table(TableActivityDependency),
			Item:                toAVItem(attr.EncodeDependency(&w.Dependencies[i])),
			ConditionExpression: aws.String("attribute_not_exists(activity_exec_dependency)"),
		})
	}
	for first := true; len(rest) > 0; first = false {
		if !first {
			wf, err := st.get(ctx, "GetWorkflow", TableWorkflowExec, workflowKey(w.Exec.WorkflowExecID, w.Exec.WorkflowName))
			if err != nil {
				return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
			}
			if s, _ := wf["state"].(attr.S); s != attr.S(state.WorkflowRequested) {
				return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, existsError(w, wf))
			}
		}
		n := min(batchItems, len(rest))
		if err := st.putAbsent(ctx, rest[:n]); err != nil {
			return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
		}
		rest = rest[n:]
	}
	return nil
}

// batchItems is how many items CreateWorkflow writes between two checks
// that the workflow is still REQUESTED; putters of them run at once.
const (
	batchItems = 98
	putters    = 16
)

// putGuarded makes one conditional put whose failure means that the
// execution (or its request) exists: the answer names it.
func (st *Store) putGuarded(ctx context.Context, w *state.NewWorkflow, in *dynamodb.PutItemInput) error {
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	in.ReturnConsumedCapacity = st.returnCapacity()
	out, err := st.api.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return existsError(w, nilIfEmpty(ccf.Item))
	case err != nil:
		return err
	}
	st.report("CreateWorkflow", reportOne(out.ConsumedCapacity)...)
	return nil
}

// putAbsent puts items that must not exist yet, putters at a time; one
// that exists was written by an earlier attempt and is left as it is.
func (st *Store) putAbsent(ctx context.Context, ins []*dynamodb.PutItemInput) error {
	errs := make([]error, len(ins))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(putters, len(ins)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				in := ins[i]
				in.ReturnConsumedCapacity = st.returnCapacity()
				out, err := st.api.PutItem(ctx, in)
				var ccf *types.ConditionalCheckFailedException
				switch {
				case errors.As(err, &ccf):
				case err != nil:
					errs[i] = err
				default:
					st.report("CreateWorkflow", reportOne(out.ConsumedCapacity)...)
				}
			}
		}()
	}
	for i := range ins {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// existsError names the execution that exists instead of w.
func existsError(w *state.NewWorkflow, old attr.Item) error {
	// Workflow items have a state; request items do not.
	if s, ok := old["state"].(attr.S); ok || w.Request == nil {
		what := "workflow execution " + w.Exec.WorkflowExecID
		if ok {
			what += " (" + string(s) + ")"
		}
		return &state.ExistsError{What: what, WorkflowExecID: w.Exec.WorkflowExecID}
	}
	e := &state.ExistsError{What: "workflow request " + w.Request.WorkflowRequestID}
	if v, ok := old["workflow_exec_id"].(attr.S); ok {
		e.WorkflowExecID = string(v) // a foreign request may not say which execution it started
	}
	return e
}

func workflowKey(id, name string) item {
	return item{"workflow_exec_id": avS(id), "workflow_name": avS(name)}
}

// GetWorkflow implements state.Store.
func (st *Store) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("get workflow: %w", err)
	}
	m, err := st.get(ctx, "GetWorkflow", TableWorkflowExec, workflowKey(id, name))
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "workflow", ID: id}
	}
	st.restamp(ctx, workflowStamps, m)
	v, err := attr.DecodeWorkflow(st.prefix+TableWorkflowExec, m)
	return v, st.undecoded.Check(err)
}

// GetRequest implements state.Store.
func (st *Store) GetRequest(ctx context.Context, id, workflowName string) (*state.WorkflowRequest, error) {
	m, err := st.get(ctx, "GetRequest", TableWorkflowRequest, item{"workflow_request_id": avS(id), "workflow_name": avS(workflowName)})
	if err != nil {
		return nil, fmt.Errorf("get workflow request %s: %w", id, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "workflow request", ID: id}
	}
	v, err := attr.DecodeRequest(st.prefix+TableWorkflowRequest, m)
	return v, st.undecoded.Check(err)
}

// UpdateWorkflow implements state.Store.
func (st *Store) UpdateWorkflow(ctx context.Context, id string, c state.WorkflowChange) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("update workflow: %w", err)
	}
	cond, upd, err := attr.WorkflowChange(c)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	upd = workflowStamps.update(attr.Item{"workflow_exec_id": attr.S(id), "workflow_name": attr.S(name)}, upd)
	m, old, err := st.update(ctx, "UpdateWorkflow", TableWorkflowExec, workflowKey(id, name), cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	if m == nil {
		return nil, attr.Conflict("workflow", st.prefix+TableWorkflowExec, id, cond, old)
	}
	w, err := attr.DecodeWorkflow(st.prefix+TableWorkflowExec, m)
	if err != nil && w.State.Valid() {
		st.log.Warn("a workflow the store wrote has a malformed attribute", "error", err)
		return w, nil // the write landed
	}
	return w, err
}

// Workflows implements state.Store: through the name index when a name is
// given, else through the state index, one state or all of them.
func (st *Store) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	if q.Name == "" && q.State == "" {
		var all []*state.WorkflowExec
		var skipped []*state.DecodeError
		for _, s := range state.WorkflowStates {
			q.State = s
			some, err := st.Workflows(ctx, q)
			bad, err := state.Skipped(err)
			if err != nil {
				return nil, err
			}
			skipped = append(skipped, bad...)
			all = append(all, some...)
		}
		sort.SliceStable(all, func(i, j int) bool { return all[i].StartTime.After(all[j].StartTime) })
		if q.Limit > 0 && len(all) > q.Limit {
			all = all[:q.Limit]
		}
		if len(skipped) > 0 {
			return all, &state.SkippedError{Items: skipped}
		}
		return all, nil
	}
	out, noIndex, err := queryShards(func(n int) ([]*state.WorkflowExec, error) {
		return st.workflowShard(ctx, q, n)
	}, func(a, b *state.WorkflowExec) bool {
		if !a.StartTime.Equal(b.StartTime) {
			return a.StartTime.After(b.StartTime)
		}
		return a.WorkflowExecID > b.WorkflowExecID
	}, q.Limit)
	if _, other := state.Skipped(err); other != nil {
		if noIndex {
			return nil, fmt.Errorf("list workflows: table %s lacks the sharded indexes %s and %s (it was installed before schema version 4): run `whimbrel install`, which adds them: %w",
				st.prefix+TableWorkflowExec, indexStateShard, indexNameShard, other)
		}
		return nil, fmt.Errorf("list workflows: %w", other)
	}
	return out, err
}

// workflowShard reads one shard of the workflow state index, or of the
// name index when q has a name, newest first. A workflow that a writer
// older than the sharded indexes moved still sits under its old state's
// shard: it is left out and put under its state's.
func (st *Store) workflowShard(ctx context.Context, q state.WorkflowQuery, n int) ([]*state.WorkflowExec, error) {
	index, hash := indexStateShard, expression.Key(AttrStateShard).Equal(expression.Value(avS(string(q.State)+"#"+strconv.Itoa(n))))
	if q.Name != "" {
		index, hash = indexNameShard, expression.Key(AttrNameShard).Equal(expression.Value(avS(q.Name+"#"+strconv.Itoa(n))))
	}
	kc := hash
	if !q.Since.IsZero() {
		kc = kc.And(expression.Key("start_time_epoch").GreaterThanEqual(expression.Value(avN(state.FormatEpoch(q.Since)))))
	}
	b := expression.NewBuilder().WithKeyCondition(kc)
	if q.Name != "" && q.State != "" {
		b = b.WithFilter(expression.Name("state").Equal(expression.Value(avS(string(q.State)))))
	}
	expr, err := b.Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 st.table(TableWorkflowExec),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(false),
	}
	if expr.Filter() != nil {
		in.FilterExpression = expr.Filter()
	}
	var out []*state.WorkflowExec
	skips := st.undecoded.NewSkips()
	err = st.query(ctx, "Workflows", in, q.Limit, func(m item) error {
		it := fromAVItem(m)
		if s, _ := it["state"].(attr.S); q.Name == "" && s != attr.S(q.State) && state.WorkflowState(s).Valid() {
			st.restamp(ctx, workflowStamps, it)
			return nil
		} // an item with no valid state fails to decode below, and is reported
		w, err := attr.DecodeWorkflow(st.prefix+TableWorkflowExec, it)
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, skips.Err()
}

// --- activities

// GetActivity implements state.Store.
func (st *Store) GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error) {
	m, err := st.get(ctx, "GetActivity", TableActivityExec, toAVItem(attr.ActivityKey(key)))
	if err != nil {
		return nil, fmt.Errorf("get activity %s: %w", key.ActivityExecID, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	st.restamp(ctx, activityStamps, m)
	v, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	return v, st.undecoded.Check(err)
}

// Activities implements state.Store.
func (st *Store) Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error) {
	keys, err := st.activityKeys(ctx, workflowExecID)
	if err != nil {
		return nil, fmt.Errorf("list activities of %s: %w", workflowExecID, err)
	}
	var out []*state.ActivityExec
	skips := st.undecoded.NewSkips()
	err = st.batchGet(ctx, TableActivityExec, keys, func(m item) error {
		it := fromAVItem(m)
		st.restamp(ctx, activityStamps, it)
		a, err := attr.DecodeActivity(st.prefix+TableActivityExec, it)
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read activities of %s: %w", workflowExecID, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ActivityExecID < out[j].ActivityExecID })
	return out, skips.Err()
}

// activityKeys lists the keys of a workflow's activities through the
// workflow index.
func (st *Store) activityKeys(ctx context.Context, workflowExecID string) ([]item, error) {
	var keys []item
	err := st.query(ctx, "Activities", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
		IndexName:                 aws.String(indexWorkflow),
		KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": avS(workflowExecID)},
	}, 0, func(m item) error {
		keys = append(keys, item{"activity_exec_id": m["activity_exec_id"], "workflow_exec_id": m["workflow_exec_id"]})
		return nil
	})
	return keys, err
}

// UpdateActivity implements state.Store.
func (st *Store) UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	cond, upd, err := attr.ActivityChange(c)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	upd = shardUpdate(key, upd)
	return st.updateActivity(ctx, "UpdateActivity", key, cond, upd)
}

// Heartbeat implements state.Store. It sets two attributes that no index
// projects, and returns nothing on success, so it costs one write unit.
func (st *Store) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	cond, upd := attr.Heartbeat(owner, at)
	expr, err := expressionOf(cond, upd)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", key.ActivityExecID, err)
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           st.table(TableActivityExec),
		Key:                                 toAVItem(attr.ActivityKey(key)),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, nilIfEmpty(ccf.Item))
	case err != nil:
		return fmt.Errorf("heartbeat %s: %w", key.ActivityExecID, err)
	}
	st.report("Heartbeat", reportOne(out.ConsumedCapacity)...)
	return nil
}

// updateActivity makes one conditional write and returns the item as
// written, or the conflict. The write has landed when it returns an item,
// so an attribute it did not need being malformed does not turn it into a
// failure: that is logged, and the item returned as far as it was read.
func (st *Store) updateActivity(ctx context.Context, op string, key state.ActivityKey, cond attr.Cond, upd attr.Update) (*state.ActivityExec, error) {
	m, old, err := st.update(ctx, op, TableActivityExec, toAVItem(attr.ActivityKey(key)), cond, upd)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if m == nil {
		return nil, attr.Conflict("activity", st.prefix+TableActivityExec, key.ActivityExecID, cond, old)
	}
	a, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		return a, nil
	}
	return a, err
}

// Expire implements state.Store: one UpdateItem per item, each only if the
// item exists.
func (st *Store) Expire(ctx context.Context, id string, at time.Time) error {
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		return fmt.Errorf("expire %s: %w", id, err)
	}
	upd := attr.Expire(at)
	type target struct {
		base string
		key  item
		pk   string
	}
	targets := []target{{TableWorkflowExec, workflowKey(id, wf.WorkflowName), "workflow_exec_id"}}
	if wf.WorkflowRequestID != "" {
		targets = append(targets, target{TableWorkflowRequest,
			item{"workflow_request_id": avS(wf.WorkflowRequestID), "workflow_name": avS(wf.WorkflowName)}, "workflow_request_id"})
	}
	for _, q := range []struct{ base, pk, rk string }{
		{TableActivityExec, "activity_exec_id", "workflow_exec_id"},
		{TableActivityDependency, "activity_exec_dependency", "activity_exec_id"},
	} {
		err := st.query(ctx, "Expire", &dynamodb.QueryInput{
			TableName:                 st.table(q.base),
			IndexName:                 aws.String(indexWorkflow),
			KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":w": avS(id)},
		}, 0, func(m item) error {
			targets = append(targets, target{q.base, item{q.pk: m[q.pk], q.rk: m[q.rk]}, q.pk})
			return nil
		})
		if err != nil {
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	// The Simple Lambda API's events of each activity go with it.
	for _, tg := range targets {
		if tg.base != TableActivityExec {
			continue
		}
		err := st.query(ctx, "Expire", &dynamodb.QueryInput{
			TableName:                 st.table(TableActivityEvent),
			IndexName:                 aws.String(indexActivity),
			KeyConditionExpression:    aws.String("activity_exec_id = :a"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": tg.key["activity_exec_id"]},
			ProjectionExpression:      aws.String("activity_event_id, activity_exec_id"),
		}, 0, func(m item) error {
			targets = append(targets, target{TableActivityEvent, item{"activity_event_id": m["activity_event_id"], "activity_exec_id": m["activity_exec_id"]}, "activity_event_id"})
			return nil
		})
		if err != nil {
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	for _, tg := range targets {
		_, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 st.table(tg.base),
			Key:                       tg.key,
			ConditionExpression:       aws.String("attribute_exists(#k)"),
			UpdateExpression:          aws.String("SET #e = :e"),
			ExpressionAttributeNames:  map[string]string{"#k": tg.pk, "#e": attr.ExpiresAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":e": toAV(upd.Set[attr.ExpiresAt])},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) { // a vanished item needs no expiry
			return fmt.Errorf("expire %s: %w", id, err)
		}
	}
	return nil
}

// --- dependencies

// Dependencies implements state.Store.
func (st *Store) Dependencies(ctx context.Context, workflowExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "Dependencies", indexWorkflow, "workflow_exec_id", workflowExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependencies of %s: %w", workflowExecID, err)
	}
	return out, err
}

// Dependents implements state.Store.
func (st *Store) Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error) {
	out, err := st.dependencyItems(ctx, "Dependents", indexDependent, "dependent_activity_exec_id", activityExecID)
	if _, other := state.Skipped(err); other != nil {
		return nil, fmt.Errorf("list dependents of %s: %w", activityExecID, err)
	}
	return out, err
}

// dependencyItems reads the dependency items an index lists under a key,
// ordered by ID.
func (st *Store) dependencyItems(ctx context.Context, op, index, keyAttr, value string) ([]state.Dependency, error) {
	var out []state.Dependency
	skips := st.undecoded.NewSkips()
	err := st.query(ctx, op, &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityDependency),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#k = :v"),
		ExpressionAttributeNames:  map[string]string{"#k": keyAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": avS(value)},
	}, 0, func(m item) error {
		d, err := attr.DecodeDependency(st.prefix+TableActivityDependency, fromAVItem(m))
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, skips.Err()
}

// ResolveDependency implements state.Store. Removing the edge with DELETE
// under a contains() condition counts it exactly once however often it is
// replayed, which a counter could not.
func (st *Store) ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (*state.ActivityExec, bool, error) {
	cond, upd := attr.ResolveDependency(upstreamID)
	m, old, err := st.update(ctx, "ResolveDependency", TableActivityExec, toAVItem(attr.ActivityKey(waiting)), cond, upd)
	if err != nil {
		return nil, false, fmt.Errorf("resolve dependency of %s on %s: %w", waiting.ActivityExecID, upstreamID, err)
	}
	resolved := m != nil
	if !resolved {
		if old == nil {
			return nil, false, &state.NotFoundError{Kind: "activity", ID: waiting.ActivityExecID}
		}
		m = old // already resolved: the item as it stands
	}
	a, err := attr.DecodeActivity(st.prefix+TableActivityExec, m)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		err = nil
	}
	return a, resolved, err
}

// --- helpers

// get reads one item with a consistent read; nil if it does not exist.
func (st *Store) get(ctx context.Context, op, base string, key item) (attr.Item, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: st.table(base), Key: key, ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	if err != nil {
		return nil, err
	}
	st.report(op, reportOne(out.ConsumedCapacity)...)
	return nilIfEmpty(out.Item), nil
}

// update makes one conditional UpdateItem. It returns the item as written,
// or, when the condition failed, nil and the item as it was (nil if it does
// not exist).
func (st *Store) update(ctx context.Context, op, base string, key item, cond attr.Cond, upd attr.Update) (written, old attr.Item, err error) {
	expr, err := expressionOf(cond, upd)
	if err != nil {
		return nil, nil, err
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           st.table(base),
		Key:                                 key,
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return nil, nilIfEmpty(ccf.Item), nil
	case err != nil:
		return nil, nil, err
	}
	st.report(op, reportOne(out.ConsumedCapacity)...)
	return fromAVItem(out.Attributes), nil, nil
}

func nilIfEmpty(m item) attr.Item {
	if len(m) == 0 {
		return nil
	}
	return fromAVItem(m)
}

// expressionOf writes a condition and an update as DynamoDB expressions.
// Every condition requires the item to exist, so no update creates one.
func expressionOf(c attr.Cond, u attr.Update) (expression.Expression, error) {
	var parts []expression.ConditionBuilder
	if len(c.States) > 0 {
		var rest []expression.OperandBuilder
		for _, s := range c.States[1:] {
			rest = append(rest, expression.Value(avS(s)))
		}
		parts = append(parts, expression.Name("state").In(expression.Value(avS(c.States[0])), rest...))
	}
	if c.Owner != "" {
		parts = append(parts, expression.Name("owner").Equal(expression.Value(avS(c.Owner))))
	}
	if c.NoPending {
		parts = append(parts, expression.AttributeNotExists(expression.Name("pending_dependencies")))
	}
	if c.HeartbeatSeen != nil {
		hb := expression.Name("heartbeat_time_epoch")
		if c.HeartbeatSeen.IsZero() {
			parts = append(parts, expression.Or(expression.AttributeNotExists(hb), hb.LessThan(expression.Value(avN("0")))))
		} else {
			parts = append(parts, hb.LessThan(expression.Value(toAV(attr.HeartbeatCutoff(*c.HeartbeatSeen)))))
		}
	}
	if c.Contains != "" {
		// contains() also matches within a String or a List; only a String
		// Set is one, as the SQLite store reads it.
		p := expression.Name("pending_dependencies")
		parts = append(parts, expression.Contains(p, c.Contains), expression.AttributeType(p, expression.StringSet))
		if c.OnlyPending {
			parts = append(parts, expression.Size(p).Equal(expression.Value(avN("1"))))
		}
	}
	if c.NumericAttempt {
		a := expression.Name("attempt")
		parts = append(parts, expression.Or(expression.AttributeNotExists(a), expression.AttributeType(a, expression.Number)))
	}
	if m := c.Match; m != nil {
		a := expression.Name(m.Attr)
		if m.Value == "" {
			parts = append(parts, expression.AttributeNotExists(a))
		} else {
			parts = append(parts, a.Equal(expression.Value(avS(m.Value))))
		}
	}
	if len(parts) == 0 || (len(c.States) == 0 && c.Contains == "") {
		return expression.Expression{}, errors.New("a condition needs a state or an edge, so the item must exist")
	}
	cond := parts[0]
	if len(parts) > 1 {
		cond = expression.And(parts[0], parts[1], parts[2:]...)
	}
	var upd expression.UpdateBuilder
	for name, v := range u.Set {
		upd = upd.Set(expression.Name(name), expression.Value(toAV(v)))
	}
	for _, name := range u.Remove {
		upd = upd.Remove(expression.Name(name))
	}
	if u.FirstAttempt {
		a := expression.Name("attempt")
		upd = upd.Set(a, expression.IfNotExists(a, expression.Value(avN("1"))))
	}
	if u.Delete != "" {
		upd = upd.Delete(expression.Name("pending_dependencies"), expression.Value(&types.AttributeValueMemberSS{Value: []string{u.Delete}}))
	}
	return expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
}

// query runs a Query to the end (or to limit items), handing each item to fn.
func (st *Store) query(ctx context.Context, op string, in *dynamodb.QueryInput, limit int, fn func(item) error) error {
	in.ReturnConsumedCapacity = st.returnCapacity()
	n := 0
	for {
		if limit > 0 {
			in.Limit = aws.Int32(int32(min(limit-n, 1000)))
		}
		out, err := st.api.Query(ctx, in)
		if err != nil {
			return err
		}
		st.report(op, reportOne(out.ConsumedCapacity)...)
		for _, m := range out.Items {
			if err := fn(m); err != nil {
				return err
			}
			n++
		}
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && n >= limit) {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// batchGet reads items by key with consistent reads, 100 at a time,
// retrying what DynamoDB leaves unprocessed; only, when given, names the
// attributes to read.
func (st *Store) batchGet(ctx context.Context, base string, keys []item, fn func(item) error, only ...string) error {
	name := st.prefix + base
	var projection *string
	var names map[string]string
	if len(only) > 0 { // read only these attributes
		names = map[string]string{}
		var p []string
		for i, a := range only {
			names[fmt.Sprintf("#a%d", i)] = a
			p = append(p, fmt.Sprintf("#a%d", i))
		}
		projection = aws.String(strings.Join(p, ", "))
	}
	for start := 0; start < len(keys); start += 100 {
		pending := map[string]types.KeysAndAttributes{name: {
			Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(true),
			ProjectionExpression: projection, ExpressionAttributeNames: names,
		}}
		b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithInitialInterval(20*time.Millisecond)), ctx)
		for len(pending) > 0 {
			out, err := st.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: pending, ReturnConsumedCapacity: st.returnCapacity(),
			})
			if err != nil {
				return err
			}
			st.report("BatchGetItem", out.ConsumedCapacity...)
			for _, m := range out.Responses[name] {
				if err := fn(m); err != nil {
					return err
				}
			}
			pending = out.UnprocessedKeys
			if len(pending) > 0 {
				wait := b.NextBackOff()
				if wait == backoff.Stop {
					return fmt.Errorf("read %s: keys left unprocessed", name)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
			}
		}
	}
	return nil
}
