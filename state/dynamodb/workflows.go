package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

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
