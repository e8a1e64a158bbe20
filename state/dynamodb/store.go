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
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"
	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/state"
)

// API lists the DynamoDB calls the Store makes; *dynamodb.Client satisfies
// it, and tests may wrap it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// Options configure a Store.
type Options struct {
	// Prefix is prepended to every table name (default DefaultPrefix).
	Prefix string
	// Logger receives the Store's and the SDK's log lines (default: none).
	Logger hclog.Logger
	// Capacity, when set, asks DynamoDB for the capacity each call consumed
	// and reports it. Benchmarks and cost tests use it.
	Capacity func(Capacity)
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
	api      API
	prefix   string
	log      hclog.Logger
	capacity func(Capacity)
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
	return &Store{api: api, prefix: opts.Prefix, log: opts.Logger, capacity: opts.Capacity}
}

// Open returns a Store on a client built from the SDK's default chain:
// region, credentials and endpoint come from the environment and shared
// config, including AWS_ENDPOINT_URL_DYNAMODB for a local endpoint.
func Open(ctx context.Context, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sdkLog := log.Named("aws")
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.LoggerFunc(
		func(c logging.Classification, format string, v ...interface{}) {
			// The SDK's own warnings are about transport details; they
			// belong in our log at debug level, never on the wrapped
			// command's stderr.
			sdkLog.Debug(fmt.Sprintf(format, v...), "classification", string(c))
		})))
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	local := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || os.Getenv("AWS_ENDPOINT_URL") != ""
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		// DynamoDB Local answers errors with bodies whose CRC32 the SDK
		// rejects; a custom endpoint is where that happens.
		o.DisableValidateResponseChecksum = local
	})
	return New(client, opts), nil
}

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

// CreateWorkflow implements state.Store. The items go in transactions of at
// most maxTransactItems; the first carries the request and the workflow item
// with the conditions that make a repeated request answer with the first
// execution, and every later one a check that the workflow is still
// REQUESTED, so nothing is added to a workflow that has moved on. Activity
// and dependency items are put only if absent, so a retry after a partial
// write completes it without touching what exists.
func (st *Store) CreateWorkflow(ctx context.Context, w *state.NewWorkflow) error {
	if err := checkNewWorkflow(w); err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	requested := map[string]types.AttributeValue{":r": avS(string(state.WorkflowRequested))}
	stateName := map[string]string{"#s": "state"}
	var head []types.TransactWriteItem // guarded: their failure means "exists"
	if w.Request != nil {
		head = append(head, types.TransactWriteItem{Put: &types.Put{
			TableName:           st.table(TableWorkflowRequest),
			Item:                encodeRequest(w.Request),
			ConditionExpression: aws.String("attribute_not_exists(workflow_request_id) OR workflow_exec_id = :e"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":e": avS(w.Exec.WorkflowExecID),
			},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}})
	}
	head = append(head, types.TransactWriteItem{Put: &types.Put{
		TableName:                           st.table(TableWorkflowExec),
		Item:                                encodeWorkflow(&w.Exec),
		ConditionExpression:                 aws.String("attribute_not_exists(workflow_exec_id) OR #s = :r"),
		ExpressionAttributeNames:            stateName,
		ExpressionAttributeValues:           requested,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	stillRequested := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           st.table(TableWorkflowExec),
		Key:                                 item{"workflow_exec_id": avS(w.Exec.WorkflowExecID), "workflow_name": avS(w.Exec.WorkflowName)},
		ConditionExpression:                 aws.String("#s = :r"),
		ExpressionAttributeNames:            stateName,
		ExpressionAttributeValues:           requested,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}

	var rest []types.TransactWriteItem
	for i := range w.Activities {
		rest = append(rest, types.TransactWriteItem{Put: &types.Put{
			TableName:           st.table(TableActivityExec),
			Item:                encodeActivity(&w.Activities[i]),
			ConditionExpression: aws.String("attribute_not_exists(activity_exec_id)"),
		}})
	}
	for i := range w.Dependencies {
		rest = append(rest, types.TransactWriteItem{Put: &types.Put{
			TableName:           st.table(TableActivityDependency),
			Item:                encodeDependency(&w.Dependencies[i]),
			ConditionExpression: aws.String("attribute_not_exists(activity_exec_dependency)"),
		}})
	}

	chunk := append(head, rest[:min(maxTransactItems-len(head), len(rest))]...)
	rest = rest[len(chunk)-len(head):]
	if err := st.transact(ctx, w, chunk, len(head)); err != nil {
		return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
	}
	for len(rest) > 0 {
		n := min(maxTransactItems-1, len(rest))
		chunk := append([]types.TransactWriteItem{stillRequested}, rest[:n]...)
		rest = rest[n:]
		if err := st.transact(ctx, w, chunk, 1); err != nil {
			return fmt.Errorf("create workflow %s: %w", w.Exec.WorkflowExecID, err)
		}
	}
	return nil
}

// maxTransactItems is DynamoDB's limit of items in one transaction.
const maxTransactItems = 100

// transact writes one chunk. The first guarded writes must succeed, or the
// workflow exists already (or has moved on); any other write whose
// condition fails exists already from an earlier attempt and is dropped
// before trying again.
func (st *Store) transact(ctx context.Context, w *state.NewWorkflow, writes []types.TransactWriteItem, guarded int) error {
	op := func() error {
		out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          writes,
			ReturnConsumedCapacity: st.returnCapacity(),
		})
		if err == nil {
			st.report("CreateWorkflow", out.ConsumedCapacity...)
			return nil
		}
		var tc *types.TransactionCanceledException
		if !errors.As(err, &tc) || len(tc.CancellationReasons) != len(writes) {
			return backoff.Permanent(err) // the SDK has retried what is retryable
		}
		var keep []types.TransactWriteItem
		contention := false
		for i, r := range tc.CancellationReasons {
			switch code := aws.ToString(r.Code); code {
			case "", "None":
			case "ConditionalCheckFailed":
				if i < guarded {
					return backoff.Permanent(st.existsError(w, r.Item))
				}
				continue // written by an earlier attempt
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				contention = true
			default:
				return backoff.Permanent(fmt.Errorf("item %d of the transaction: %s: %s", i, code, aws.ToString(r.Message)))
			}
			keep = append(keep, writes[i])
		}
		writes = keep
		if contention {
			return fmt.Errorf("transaction cancelled by contention: %w", err)
		}
		return errors.New("some items exist already; writing the rest")
	}
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(10*time.Millisecond)), 10), ctx)
	return backoff.RetryNotify(op, b, func(err error, wait time.Duration) {
		st.log.Debug("retrying a workflow's transaction", "error", err, "wait", wait)
	})
}

func (st *Store) existsError(w *state.NewWorkflow, old item) error {
	// Workflow items have a state; request items do not.
	if s, ok := old["state"].(*types.AttributeValueMemberS); ok || w.Request == nil {
		what := "workflow execution " + w.Exec.WorkflowExecID
		if ok {
			what += " (" + s.Value + ")"
		}
		return &state.ExistsError{What: what, WorkflowExecID: w.Exec.WorkflowExecID}
	}
	e := &state.ExistsError{What: "workflow request " + w.Request.WorkflowRequestID}
	if v, ok := old["workflow_exec_id"].(*types.AttributeValueMemberS); ok {
		e.WorkflowExecID = v.Value // a foreign request may not say which execution it started
	}
	return e
}

// checkNewWorkflow refuses input that would write a workflow the contract
// cannot run: wrong states, items of another workflow, duplicate keys,
// dependency items that disagree with the pending sets.
func checkNewWorkflow(w *state.NewWorkflow) error {
	ex := &w.Exec
	switch {
	case ex.State != state.WorkflowRequested:
		return fmt.Errorf("a new workflow must be %s, not %s", state.WorkflowRequested, ex.State)
	case ex.WorkflowExecID == "" || ex.WorkflowName == "":
		return errors.New("a new workflow needs an ID and a name")
	case ex.StartTime.IsZero():
		return errors.New("a new workflow needs a start time: the state index sorts by it")
	case w.Request != nil && w.Request.WorkflowExecID != ex.WorkflowExecID:
		return errors.New("the request must name the execution it starts")
	}
	if _, err := state.WorkflowNameOf(ex.WorkflowExecID); err != nil {
		return err
	}
	upstreams := map[string][]string{} // waiting activity → what it waits on, from the dependency items
	acts := map[string]bool{}
	for _, a := range w.Activities {
		switch {
		case a.State != state.Requested:
			return fmt.Errorf("activity %s: a new activity must be %s, not %s", a.ActivityExecID, state.Requested, a.State)
		case a.ActivityExecID == "" || a.WorkflowExecID != ex.WorkflowExecID:
			return fmt.Errorf("activity %q: it must have an ID and belong to workflow %s", a.ActivityExecID, ex.WorkflowExecID)
		case a.StateTime.IsZero():
			return fmt.Errorf("activity %s: a new activity needs a state time: the state index sorts by it", a.ActivityExecID)
		case acts[a.ActivityExecID]:
			return fmt.Errorf("activity %s appears twice", a.ActivityExecID)
		}
		acts[a.ActivityExecID] = true
	}
	deps := map[string]bool{}
	for _, d := range w.Dependencies {
		switch {
		case d.ID == "" || d.DependentActivityExecID == "":
			return fmt.Errorf("dependency %q: it needs an ID and the activity waited on", d.ID)
		case d.WorkflowExecID != ex.WorkflowExecID || !acts[d.ActivityExecID]:
			return fmt.Errorf("dependency %s: its waiting activity %q must be an activity of workflow %s", d.ID, d.ActivityExecID, ex.WorkflowExecID)
		case deps[d.ID]:
			return fmt.Errorf("dependency %s appears twice", d.ID)
		}
		deps[d.ID] = true
		upstreams[d.ActivityExecID] = append(upstreams[d.ActivityExecID], d.DependentActivityExecID)
	}
	for _, a := range w.Activities {
		want := slices.Clone(upstreams[a.ActivityExecID])
		slices.Sort(want)
		got := slices.Clone(a.PendingDependencies)
		slices.Sort(got)
		if len(slices.Compact(slices.Clone(got))) != len(got) {
			return fmt.Errorf("activity %s: its pending dependencies repeat an activity", a.ActivityExecID)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("activity %s: its pending dependencies %v differ from its dependency items %v", a.ActivityExecID, got, want)
		}
	}
	return nil
}

// GetWorkflow implements state.Store.
func (st *Store) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("get workflow: %w", err)
	}
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      st.table(TableWorkflowExec),
		Key:            item{"workflow_exec_id": avS(id), "workflow_name": avS(name)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get workflow %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, &state.NotFoundError{Kind: "workflow", ID: id}
	}
	return decodeWorkflow(st.prefix+TableWorkflowExec, out.Item)
}

// GetRequest implements state.Store.
func (st *Store) GetRequest(ctx context.Context, id, workflowName string) (*state.WorkflowRequest, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      st.table(TableWorkflowRequest),
		Key:            item{"workflow_request_id": avS(id), "workflow_name": avS(workflowName)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get workflow request %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, &state.NotFoundError{Kind: "workflow request", ID: id}
	}
	return decodeRequest(st.prefix+TableWorkflowRequest, out.Item)
}

// UpdateWorkflow implements state.Store.
func (st *Store) UpdateWorkflow(ctx context.Context, id string, c state.WorkflowChange) (*state.WorkflowExec, error) {
	name, err := state.WorkflowNameOf(id)
	if err != nil {
		return nil, fmt.Errorf("update workflow: %w", err)
	}
	if len(c.From) == 0 {
		return nil, fmt.Errorf("update workflow %s: no state to move from", id)
	}
	for _, f := range c.From {
		if err := state.CheckWorkflowTransition(f, c.To); err != nil {
			return nil, fmt.Errorf("update workflow %s: %w", id, err)
		}
	}
	at := c.At
	if at.IsZero() {
		at = time.Now()
	}
	cond := inStates(wfStrings(c.From))
	upd := expression.Set(expression.Name("state"), expression.Value(avS(string(c.To))))
	if c.To.Terminal() {
		upd = upd.Set(expression.Name("end_time"), expression.Value(avList(at))).
			Set(expression.Name("end_time_epoch"), expression.Value(avN(state.FormatEpoch(at))))
	}
	if c.Reason != "" {
		upd = upd.Set(expression.Name("reason"), expression.Value(avS(c.Reason)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           st.table(TableWorkflowExec),
		Key:                                 item{"workflow_exec_id": avS(id), "workflow_name": avS(name)},
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if len(ccf.Item) == 0 {
				return nil, &state.NotFoundError{Kind: "workflow", ID: id}
			}
			old, derr := decodeWorkflow(st.prefix+TableWorkflowExec, ccf.Item)
			if derr != nil && !old.State.Valid() {
				return nil, derr
			}
			return nil, &state.ConflictError{Kind: "workflow", ID: id, State: string(old.State),
				Want: "state " + joinStates(wfStrings(c.From))}
		}
		return nil, fmt.Errorf("update workflow %s: %w", id, err)
	}
	st.report("UpdateWorkflow", reportOne(out.ConsumedCapacity)...)
	w, err := decodeWorkflow(st.prefix+TableWorkflowExec, out.Attributes)
	if err != nil && w.State.Valid() {
		st.log.Warn("a workflow the store wrote has a malformed attribute", "error", err)
		return w, nil // the write landed
	}
	return w, err
}

// Workflows implements state.Store.
func (st *Store) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	kc := expression.Key("state").Equal(expression.Value(avS(string(q.State))))
	if !q.Since.IsZero() {
		kc = kc.And(expression.Key("start_time_epoch").GreaterThanEqual(expression.Value(avN(state.FormatEpoch(q.Since)))))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	var out []*state.WorkflowExec
	err = st.query(ctx, "Workflows", &dynamodb.QueryInput{
		TableName:                 st.table(TableWorkflowExec),
		IndexName:                 aws.String(indexWorkflowState),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(false),
	}, q.Limit, func(m item) error {
		w, err := decodeWorkflow(st.prefix+TableWorkflowExec, m)
		if err != nil {
			return err
		}
		out = append(out, w)
		return nil
	})
	return out, err
}

// --- activities

// GetActivity implements state.Store.
func (st *Store) GetActivity(ctx context.Context, key state.ActivityKey) (*state.ActivityExec, error) {
	out, err := st.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              st.table(TableActivityExec),
		Key:                    activityKey(key),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("get activity %s: %w", key.ActivityExecID, err)
	}
	st.report("GetActivity", reportOne(out.ConsumedCapacity)...)
	if len(out.Item) == 0 {
		return nil, &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	return decodeActivity(st.prefix+TableActivityExec, out.Item)
}

// Activities implements state.Store.
func (st *Store) Activities(ctx context.Context, workflowExecID string) ([]*state.ActivityExec, error) {
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
	if err != nil {
		return nil, fmt.Errorf("list activities of %s: %w", workflowExecID, err)
	}
	var out []*state.ActivityExec
	err = st.batchGet(ctx, TableActivityExec, keys, func(m item) error {
		a, err := decodeActivity(st.prefix+TableActivityExec, m)
		if err != nil {
			return err
		}
		out = append(out, a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read activities of %s: %w", workflowExecID, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ActivityExecID < out[j].ActivityExecID })
	return out, nil
}

// ActivitiesInState implements state.Store.
func (st *Store) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	kc := expression.Key("state").Equal(expression.Value(avS(string(q.State))))
	if !q.Before.IsZero() {
		kc = kc.And(expression.Key("state_time_epoch").LessThan(expression.Value(avN(state.FormatEpoch(q.Before)))))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, fmt.Errorf("list %s activities: %w", q.State, err)
	}
	var out []state.ActivityRef
	err = st.query(ctx, "ActivitiesInState", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
		IndexName:                 aws.String(indexState),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(true),
	}, q.Limit, func(m item) error {
		d := newDecoder(st.prefix+TableActivityExec, m, "activity_exec_id")
		ref := state.ActivityRef{
			ActivityKey: state.ActivityKey{
				ActivityExecID: d.str("activity_exec_id", true),
				WorkflowExecID: d.str("workflow_exec_id", true),
			},
			StateTime: d.time("state_time"),
		}
		if d.err != nil {
			return d.err
		}
		out = append(out, ref)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s activities: %w", q.State, err)
	}
	return out, nil
}

// UpdateActivity implements state.Store.
func (st *Store) UpdateActivity(ctx context.Context, key state.ActivityKey, c state.ActivityChange) (*state.ActivityExec, error) {
	expr, err := activityUpdate(c)
	if err != nil {
		return nil, fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           st.table(TableActivityExec),
		Key:                                 activityKey(key),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	if err != nil {
		return nil, st.activityError(key, describeCondition(c), err)
	}
	st.report("UpdateActivity", reportOne(out.ConsumedCapacity)...)
	return st.written(out.Attributes)
}

// written decodes an activity a write returned. The write has landed, so an
// attribute the write did not need being malformed must not turn it into a
// failure: it is logged, and the item returned as far as it could be read.
func (st *Store) written(m item) (*state.ActivityExec, error) {
	a, err := decodeActivity(st.prefix+TableActivityExec, m)
	if err != nil && a.State.Valid() && a.ActivityExecID != "" {
		st.log.Warn("an activity the store wrote has a malformed attribute", "error", err)
		return a, nil
	}
	return a, err
}

// activityUpdate builds the condition and update of an ActivityChange,
// after checking the move against the contract.
func activityUpdate(c state.ActivityChange) (expression.Expression, error) {
	if len(c.From) == 0 {
		return expression.Expression{}, errors.New("no state to move from")
	}
	if c.To != "" {
		for _, f := range c.From {
			if err := state.CheckTransition(f, c.To); err != nil {
				return expression.Expression{}, err
			}
		}
	}
	if c.Claim != nil && c.To != state.Running {
		return expression.Expression{}, fmt.Errorf("a claim moves to %s, not to %q", state.Running, c.To)
	}
	if c.To == state.Running && (c.Claim == nil || c.Claim.Owner == "") {
		return expression.Expression{}, errors.New("a move to RUNNING needs a claim with an owner token, which fences the later writes")
	}
	at := c.At
	if at.IsZero() {
		at = time.Now()
	}
	var froms []string
	for _, f := range c.From {
		froms = append(froms, string(f))
	}
	cond := inStates(froms)
	if c.Owner != "" {
		cond = cond.And(expression.Name("owner").Equal(expression.Value(avS(c.Owner))))
	}
	if (c.To == state.Ready || c.To == state.Queued) && slices.Contains(c.From, state.Requested) {
		// READY means every activity it waits on completed; QUEUED from
		// REQUESTED is for activities that wait on nothing.
		cond = cond.And(expression.AttributeNotExists(expression.Name("pending_dependencies")))
	}
	if c.HeartbeatSeen != nil {
		hb := expression.Name("heartbeat_time_epoch")
		if c.HeartbeatSeen.IsZero() {
			cond = cond.And(expression.Or(expression.AttributeNotExists(hb), hb.LessThan(expression.Value(avInt(0)))))
		} else {
			cond = cond.And(hb.Equal(expression.Value(avN(state.FormatEpoch(*c.HeartbeatSeen)))))
		}
	}
	var upd expression.UpdateBuilder
	empty := true
	set := func(name string, v types.AttributeValue) {
		upd = upd.Set(expression.Name(name), expression.Value(v))
		empty = false
	}
	setTime := func(name string) {
		set(name, avList(at))
		set(name+"_epoch", avN(state.FormatEpoch(at)))
	}
	if c.To != "" {
		set("state", avS(string(c.To)))
		setTime("state_time")
		switch {
		case c.To == state.Queued:
			setTime("queued_time")
		case c.To == state.Running:
			setTime("start_time")
		case c.To.Terminal():
			setTime("end_time")
		}
	} else if c.Exit != nil {
		setTime("end_time")
	}
	if cl := c.Claim; cl != nil {
		set("owner", avS(cl.Owner))
		set("host", avS(cl.Host))
		set("pid", avInt(cl.PID))
		set("heartbeat_enabled", avBool(cl.HeartbeatEnabled))
		set("heartbeat_time_epoch", avInt(state.NotSet))
		if cl.HeartbeatInterval > 0 {
			set("heartbeat_interval", avSeconds(cl.HeartbeatInterval))
		}
		if cl.HeartbeatTimeout > 0 {
			set("heartbeat_timeout", avSeconds(cl.HeartbeatTimeout))
		}
		upd = upd.Add(expression.Name("attempt"), expression.Value(avInt(1)))
	}
	if c.LaunchedAs != "" {
		set("launched_as", avS(c.LaunchedAs))
	}
	if c.Exit != nil {
		set("exit_code", avInt(c.Exit.Code))
		if c.Exit.Signal != "" {
			set("signal", avS(c.Exit.Signal))
		}
	}
	if c.Error != "" {
		set("error", avS(c.Error))
	}
	if c.Reason != "" {
		set("reason", avS(c.Reason))
	}
	if empty {
		return expression.Expression{}, errors.New("nothing to change")
	}
	return expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
}

// Heartbeat implements state.Store. It sets two attributes that no index
// projects, and returns nothing on success, so it costs one write unit.
func (st *Store) Heartbeat(ctx context.Context, key state.ActivityKey, owner string, at time.Time) error {
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                st.table(TableActivityExec),
		Key:                      activityKey(key),
		ConditionExpression:      aws.String("#s = :running AND #o = :owner"),
		UpdateExpression:         aws.String("SET heartbeat_time = :l, heartbeat_time_epoch = :e"),
		ExpressionAttributeNames: map[string]string{"#s": "state", "#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":running": avS(string(state.Running)),
			":owner":   avS(owner),
			":l":       avList(at),
			":e":       avN(state.FormatEpoch(at)),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	if err != nil {
		return st.activityError(key, want([]state.ActivityState{state.Running}, owner), err)
	}
	st.report("Heartbeat", reportOne(out.ConsumedCapacity)...)
	return nil
}

// activityError translates a failed conditional write into the domain's
// errors, using the item DynamoDB returned with the failure.
func (st *Store) activityError(key state.ActivityKey, want string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return fmt.Errorf("update activity %s: %w", key.ActivityExecID, err)
	}
	if len(ccf.Item) == 0 {
		return &state.NotFoundError{Kind: "activity", ID: key.ActivityExecID}
	}
	// Only the state, owner and attempt matter here; another malformed
	// attribute must not hide who won.
	old, derr := decodeActivity(st.prefix+TableActivityExec, ccf.Item)
	if derr != nil && !old.State.Valid() {
		return derr
	}
	return &state.ConflictError{Kind: "activity", ID: key.ActivityExecID, Want: want,
		State: string(old.State), Owner: old.Owner, Attempt: old.Attempt}
}

// describeCondition says in words what an ActivityChange requires.
func describeCondition(c state.ActivityChange) string {
	w := want(c.From, c.Owner)
	if (c.To == state.Ready || c.To == state.Queued) && slices.Contains(c.From, state.Requested) {
		w += " with nothing pending"
	}
	if c.HeartbeatSeen != nil {
		w += " with its last heartbeat unchanged"
	}
	return w
}

func want(from []state.ActivityState, owner string) string {
	var froms []string
	for _, f := range from {
		froms = append(froms, string(f))
	}
	w := "state " + joinStates(froms)
	if owner != "" {
		w += " held by " + owner
	}
	return w
}

// --- dependencies

// Dependents implements state.Store.
func (st *Store) Dependents(ctx context.Context, activityExecID string) ([]state.Dependency, error) {
	var out []state.Dependency
	err := st.query(ctx, "Dependents", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityDependency),
		IndexName:                 aws.String(indexDependent),
		KeyConditionExpression:    aws.String("dependent_activity_exec_id = :a"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": avS(activityExecID)},
	}, 0, func(m item) error {
		d, err := decodeDependency(st.prefix+TableActivityDependency, m)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list dependents of %s: %w", activityExecID, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// ResolveDependency implements state.Store. Removing the edge with DELETE
// under a contains() condition counts it exactly once however often it is
// replayed, which a counter could not.
func (st *Store) ResolveDependency(ctx context.Context, waiting state.ActivityKey, upstreamID string) (*state.ActivityExec, bool, error) {
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                st.table(TableActivityExec),
		Key:                      activityKey(waiting),
		ConditionExpression:      aws.String("contains(#p, :u)"),
		UpdateExpression:         aws.String("DELETE #p :set"),
		ExpressionAttributeNames: map[string]string{"#p": "pending_dependencies"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u":   avS(upstreamID),
			":set": &types.AttributeValueMemberSS{Value: []string{upstreamID}},
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return nil, false, fmt.Errorf("resolve dependency of %s on %s: %w", waiting.ActivityExecID, upstreamID, err)
		}
		if len(ccf.Item) == 0 {
			return nil, false, &state.NotFoundError{Kind: "activity", ID: waiting.ActivityExecID}
		}
		a, err := st.written(ccf.Item)
		return a, false, err
	}
	st.report("ResolveDependency", reportOne(out.ConsumedCapacity)...)
	a, err := st.written(out.Attributes)
	return a, true, err
}

// --- helpers

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
// retrying what DynamoDB leaves unprocessed.
func (st *Store) batchGet(ctx context.Context, base string, keys []item, fn func(item) error) error {
	name := st.prefix + base
	for start := 0; start < len(keys); start += 100 {
		pending := map[string]types.KeysAndAttributes{name: {
			Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(true),
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

func inStates(states []string) expression.ConditionBuilder {
	var rest []expression.OperandBuilder
	for _, s := range states[1:] {
		rest = append(rest, expression.Value(avS(s)))
	}
	return expression.Name("state").In(expression.Value(avS(states[0])), rest...)
}

func wfStrings(states []state.WorkflowState) []string {
	var out []string
	for _, s := range states {
		out = append(out, string(s))
	}
	return out
}

func joinStates(states []string) string {
	if len(states) <= 1 {
		return strings.Join(states, "")
	}
	return strings.Join(states[:len(states)-1], ", ") + " or " + states[len(states)-1]
}
