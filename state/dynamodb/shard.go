package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// The state indexes, and the workflow name index, are write-sharded: their
// hash key is a value and a shard number ("READY#7", "nightly#7"), so that
// the READY (or RUNNING) items of the whole fleet, or every execution of
// one workflow, spread over StateShards partition keys instead of sharing
// one, which DynamoDB caps at 1,000 write units a second. The activity
// state index is sparse: only live items carry state_shard, so an activity
// that ends leaves the index (one index delete, no put) and the index holds
// what someone polls, not the history. A workflow carries its shards in
// every state: `whimbrel list --state COMPLETED` and the schedules'
// --after lists read ended workflows.
const (
	// StateShards is the number of shards of each key. Writers and
	// readers agree on it without reading anything: it is fixed, and
	// install records it in install_status. At 10,000 activity lives a
	// second each key takes about 2 × 10,000 ÷ 32 = 625 index writes a
	// second (every item enters and leaves each live state once).
	StateShards = 32
	// AttrStateShard is the state indexes' hash key attribute.
	AttrStateShard = "state_shard"
	// AttrNameShard is the workflow name index's hash key attribute:
	// the workflow's name and its shard ("nightly#7").
	AttrNameShard = "name_shard"
	// indexStateShard (activity_exec: state_shard + state_time_epoch,
	// keys only; workflow_exec: state_shard + start_time_epoch).
	indexStateShard = "state-shard-index"
	// indexNameShard (workflow_exec): name_shard + start_time_epoch.
	indexNameShard = "name-shard-index"
)

// shardKey is value#n, n the shard of the item whose ID is id: a hash of
// the ID, so that every writer computes the same one without a read.
func shardKey(value, id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return value + "#" + strconv.Itoa(int(h.Sum32()%StateShards))
}

// StateShard returns the state_shard an activity in state s carries, or ""
// when s is terminal (the item is not in the index).
func StateShard(activityExecID string, s state.ActivityState) string {
	if !s.Valid() || s.Terminal() {
		return ""
	}
	return shardKey(string(s), activityExecID)
}

// WorkflowShards returns the state_shard and name_shard a workflow in
// state s carries.
func WorkflowShards(workflowExecID, workflowName string, s state.WorkflowState) (stateShard, nameShard string) {
	return shardKey(string(s), workflowExecID), shardKey(workflowName, workflowExecID)
}

// stamping says which shard attributes the items of one table carry.
type stamping struct {
	base string
	keys [2]string // the table's hash and range key attributes
	// want returns the shard attributes an item with these keys and
	// state carries ("" for one it must not carry), or false when the
	// item has no valid state.
	want func(it attr.Item) (map[string]string, bool)
	// legacyStates are the hash key values of the unsharded state index
	// (indexLegacyState) under which install looks for items to stamp;
	// what names them in install's action.
	legacyStates []string
	what         string
}

var activityStamps = stamping{
	base: TableActivityExec, keys: [2]string{"activity_exec_id", "workflow_exec_id"},
	want: func(it attr.Item) (map[string]string, bool) {
		id, _ := it["activity_exec_id"].(attr.S)
		s, _ := it["state"].(attr.S)
		if !state.ActivityState(s).Valid() {
			return nil, false
		}
		// A READY retry parked while it waits out its delay is under a
		// waiting shard (retrywait.go, retrysoon.go).
		if rw, ok := it[state.AttrRetryWait].(attr.N); ok && state.ActivityState(s) == state.Ready {
			return map[string]string{AttrStateShard: retryShard(string(id), rw, it["state_time_epoch"])}, true
		}
		// A READY waiter parked in its pool's queue is under its pool's
		// key (poolwait.go).
		if p, ok := it[state.AttrPoolWait].(attr.S); ok && p != "" && state.ActivityState(s) == state.Ready {
			return map[string]string{AttrStateShard: ParkShard(string(p))}, true
		}
		return map[string]string{AttrStateShard: StateShard(string(id), state.ActivityState(s))}, true
	},
	legacyStates: liveActivityStates(),
	what:         "live activities under their " + AttrStateShard,
}

var workflowStamps = stamping{
	base: TableWorkflowExec, keys: [2]string{"workflow_exec_id", "workflow_name"},
	want: func(it attr.Item) (map[string]string, bool) {
		id, _ := it["workflow_exec_id"].(attr.S)
		name, _ := it["workflow_name"].(attr.S)
		s, _ := it["state"].(attr.S)
		if !state.WorkflowState(s).Valid() {
			return nil, false
		}
		ss, ns := WorkflowShards(string(id), string(name), state.WorkflowState(s))
		return map[string]string{AttrStateShard: ss, AttrNameShard: ns}, true
	},
	legacyStates: workflowStates(),
	what:         "workflows under their " + AttrStateShard + " and " + AttrNameShard,
}

func liveActivityStates() []string {
	var out []string
	for _, s := range state.ActivityStates {
		if !s.Terminal() {
			out = append(out, string(s))
		}
	}
	return out
}

func workflowStates() []string {
	var out []string
	for _, s := range state.WorkflowStates {
		out = append(out, string(s))
	}
	return out
}

// stale returns the shard attributes an item lacks or has wrong, and
// whether there are any.
func (sp stamping) stale(it attr.Item) (map[string]string, bool) {
	if it[sp.keys[0]] == nil || it[sp.keys[1]] == nil {
		return nil, false
	}
	want, ok := sp.want(it)
	if !ok {
		return nil, false
	}
	for a, v := range want {
		have, present := it[a]
		if (v == "" && !present) || (v != "" && have == attr.S(v)) {
			delete(want, a)
		}
	}
	return want, len(want) > 0
}

// stamped adds the shard attributes to an item about to be put.
func (sp stamping) stamped(it attr.Item) attr.Item {
	want, _ := sp.want(it)
	for a, v := range want {
		if v != "" {
			it[a] = attr.S(v)
		}
	}
	return it
}

// update makes a write that sets the state keep the shard attributes in
// step: set to the new state's, or removed. keys are the item's keys.
func (sp stamping) update(keys attr.Item, upd attr.Update) attr.Update {
	s, ok := upd.Set["state"].(attr.S)
	if !ok {
		return upd
	}
	it := attr.Item{"state": s}
	for k, v := range keys {
		it[k] = v
	}
	want, _ := sp.want(it)
	for a, v := range want {
		if v != "" {
			upd.Set[a] = attr.S(v)
		} else {
			upd.Remove = append(upd.Remove, a)
		}
	}
	return upd
}

// withShard adds state_shard to an activity item about to be put.
func withShard(it attr.Item) attr.Item { return activityStamps.stamped(it) }

// shardUpdate makes a write that sets an activity's state keep state_shard
// in step.
func shardUpdate(key state.ActivityKey, upd attr.Update) attr.Update {
	return activityStamps.update(attr.ActivityKey(key), upd)
}

// restamp puts an item that another client wrote (no shard attributes),
// or that a writer older than the sharded indexes moved (a state_shard of
// another state), under the shards of its state, so that the launcher and
// the monitor find it. It is one conditional write that holds only while
// the item is still in the state read; it costs nothing on items Whimbrel
// wrote itself. A failure is logged: the next read tries again. It returns
// whether it stamped the item.
func (st *Store) restamp(ctx context.Context, sp stamping, m attr.Item) bool {
	want, stale := sp.stale(m)
	if !stale {
		return false
	}
	s, _ := m["state"].(attr.S)
	cond := expression.Name("state").Equal(expression.Value(avS(string(s))))
	var upd expression.UpdateBuilder
	for a, v := range want {
		if v == "" {
			upd = upd.Remove(expression.Name(a))
		} else {
			upd = upd.Set(expression.Name(a), expression.Value(avS(v)))
		}
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return false
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 st.table(sp.base),
		Key:                       item{sp.keys[0]: toAV(m[sp.keys[0]]), sp.keys[1]: toAV(m[sp.keys[1]])},
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity:    st.returnCapacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf): // it moved on: whoever moved it set the shard
	case err != nil:
		st.log.Warn("could not put an item under its state's shard; the next read tries again", "table", st.prefix+sp.base, sp.keys[0], fmt.Sprint(m[sp.keys[0]]), "error", err)
	default:
		st.report("Restamp", reportOne(out.ConsumedCapacity)...)
		return true
	}
	return false
}

// queryShards runs one query a shard in parallel and merges the results
// in order (before), keeping the first limit (0: all). Items that did not
// decode are reported together as a state.SkippedError; any other error
// is returned as it is, noIndex true when the table lacks the index.
func queryShards[T any](one func(n int) ([]T, error), before func(a, b T) bool, limit int) (out []T, noIndex bool, err error) {
	type result struct {
		some []T
		err  error
	}
	results := make([]result, StateShards)
	var wg sync.WaitGroup
	for n := range StateShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[n].some, results[n].err = one(n)
		}()
	}
	wg.Wait()
	var errs []error
	for _, r := range results {
		out = append(out, r.some...)
		if _, other := state.Skipped(r.err); other != nil {
			return nil, strings.Contains(other.Error(), "does not have the specified index"), other
		}
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	sort.Slice(out, func(i, j int) bool { return before(out[i], out[j]) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, false, joinSkipped(errs)
}

// ActivitiesInState implements state.Store: it queries every shard of the
// state in parallel and merges them by state time, oldest first.
func (st *Store) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	if !q.State.Valid() || q.State.Terminal() {
		return nil, fmt.Errorf("list %s activities: the state index holds live states only", q.State)
	}
	out, noIndex, err := queryShards(func(n int) ([]state.ActivityRef, error) {
		return st.shardRefs(ctx, q, string(q.State)+"#"+strconv.Itoa(n))
	}, func(a, b state.ActivityRef) bool {
		if !a.StateTime.Equal(b.StateTime) {
			return a.StateTime.Before(b.StateTime)
		}
		return a.ActivityExecID < b.ActivityExecID
	}, q.Limit)
	if _, other := state.Skipped(err); other != nil {
		if noIndex {
			return nil, fmt.Errorf("list %s activities: table %s has no index %s (it was installed before schema version 3): run `whimbrel install`, which adds it: %w",
				q.State, st.prefix+TableActivityExec, indexStateShard, other)
		}
		return nil, fmt.Errorf("list %s activities: %w", q.State, other)
	}
	return out, err
}

// joinSkipped merges the skipped items of several listings into one error.
func joinSkipped(errs []error) error {
	var items []*state.DecodeError
	for _, err := range errs {
		bad, _ := state.Skipped(err)
		items = append(items, bad...)
	}
	if len(items) == 0 {
		return nil
	}
	return &state.SkippedError{Items: items}
}

// shardRefs reads one shard of the state index.
func (st *Store) shardRefs(ctx context.Context, q state.ActivityQuery, shard string) ([]state.ActivityRef, error) {
	kc := expression.Key(AttrStateShard).Equal(expression.Value(avS(shard)))
	if !q.Before.IsZero() {
		kc = kc.And(expression.Key("state_time_epoch").LessThan(expression.Value(avN(state.FormatEpoch(q.Before)))))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, err
	}
	var out []state.ActivityRef
	skips := st.undecoded.NewSkips()
	err = st.query(ctx, "ActivitiesInState", &dynamodb.QueryInput{
		TableName:                 st.table(TableActivityExec),
		IndexName:                 aws.String(indexStateShard),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ScanIndexForward:          aws.Bool(true),
	}, q.Limit, func(m item) error {
		ref, err := attr.DecodeRef(st.prefix+TableActivityExec, fromAVItem(m))
		if err != nil {
			return skips.Add(err)
		}
		out = append(out, ref)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, skips.Err()
}

// backfillShards puts the items that writers older than the sharded
// indexes wrote under their shards, reading them from the legacy state
// index (keys only) when the table still has it. Repeating it finds
// nothing to do.
func (st *Store) backfillShards(ctx context.Context, sp stamping, desc *types.TableDescription, dryRun bool) (*state.InstallAction, error) {
	legacy := false
	for _, g := range desc.GlobalSecondaryIndexes {
		legacy = legacy || aws.ToString(g.IndexName) == indexLegacyState
	}
	if !legacy {
		return nil, nil
	}
	name := aws.ToString(desc.TableName)
	var keys []item
	for _, s := range sp.legacyStates {
		err := st.query(ctx, "Install", &dynamodb.QueryInput{
			TableName:                 aws.String(name),
			IndexName:                 aws.String(indexLegacyState),
			KeyConditionExpression:    aws.String("#s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(s)},
		}, 0, func(m item) error {
			keys = append(keys, item{sp.keys[0]: m[sp.keys[0]], sp.keys[1]: m[sp.keys[1]]})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list the items of %s to shard them: %w", name, err)
		}
	}
	var todo []attr.Item
	err := st.batchGet(ctx, sp.base, keys, func(m item) error {
		it := fromAVItem(m)
		if _, stale := sp.stale(it); stale {
			todo = append(todo, it)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the items of %s to shard them: %w", name, err)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	act := &state.InstallAction{Object: "table " + name, Action: fmt.Sprintf("put %d %s", len(todo), sp.what)}
	if dryRun {
		return act, nil
	}
	for _, it := range todo {
		st.restamp(ctx, sp, it)
	}
	return act, nil
}

// shardsDescription is what install_status records of a sharded index.
func shardsDescription(index, attribute, value string) string {
	return fmt.Sprintf("%s index %s in %d shards a %s (%s = %s#n)", value, index, StateShards, value, attribute, strings.ToUpper(value))
}
