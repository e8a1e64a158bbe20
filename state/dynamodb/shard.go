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

// The state index is write-sharded: its hash key is state_shard, the
// item's state and a shard number ("READY#7"), so that the READY (or
// RUNNING) items of the whole fleet spread over StateShards partition keys
// instead of sharing one, which DynamoDB caps at 1,000 write units a
// second. It is sparse: only live items carry state_shard, so an item that
// ends leaves the index (one index delete, no put) and the index holds what
// someone polls, not the history.
const (
	// StateShards is the number of shards of each state. Writers and
	// readers agree on it without reading anything: it is fixed, and
	// install records it in install_status. At 10,000 activity lives a
	// second each key takes about 2 × 10,000 ÷ 32 = 625 index writes a
	// second (every item enters and leaves each live state once).
	StateShards = 32
	// AttrStateShard is the index's hash key attribute.
	AttrStateShard = "state_shard"
	// indexStateShard (activity_exec): state_shard + state_time_epoch,
	// keys only.
	indexStateShard = "state-shard-index"
)

// StateShard returns the state_shard an activity in state s carries, or ""
// when s is terminal (the item is not in the index). The shard is a hash of
// the activity's ID, so every writer computes the same one without a read.
func StateShard(activityExecID string, s state.ActivityState) string {
	if !s.Valid() || s.Terminal() {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(activityExecID))
	return string(s) + "#" + strconv.Itoa(int(h.Sum32()%StateShards))
}

// withShard adds state_shard to an activity item about to be put.
func withShard(it attr.Item) attr.Item {
	id, _ := it["activity_exec_id"].(attr.S)
	s, _ := it["state"].(attr.S)
	if shard := StateShard(string(id), state.ActivityState(s)); shard != "" {
		it[AttrStateShard] = attr.S(shard)
	}
	return it
}

// shardUpdate makes a write that sets the state keep state_shard in step:
// set to the new state's shard, or removed when the state is terminal.
func shardUpdate(key state.ActivityKey, upd attr.Update) attr.Update {
	s, ok := upd.Set["state"].(attr.S)
	if !ok {
		return upd
	}
	if shard := StateShard(key.ActivityExecID, state.ActivityState(s)); shard != "" {
		upd.Set[AttrStateShard] = attr.S(shard)
	} else {
		upd.Remove = append(upd.Remove, AttrStateShard)
	}
	return upd
}

// restamp puts an activity that another client wrote (no state_shard), or
// that a writer older than the sharded index moved (a state_shard of
// another state), under the shard of its state, so that the launcher and
// the monitor find it. It is one conditional write that holds only while
// the item is still in the state read; it costs nothing on items Whimbrel
// wrote itself. A failure is logged: the next read tries again.
func (st *Store) restamp(ctx context.Context, m attr.Item) {
	id, _ := m["activity_exec_id"].(attr.S)
	wf, _ := m["workflow_exec_id"].(attr.S)
	s, _ := m["state"].(attr.S)
	if id == "" || wf == "" || !state.ActivityState(s).Valid() {
		return
	}
	want := StateShard(string(id), state.ActivityState(s))
	have, present := m[AttrStateShard]
	if (want == "" && !present) || (want != "" && have == attr.S(want)) {
		return
	}
	cond := expression.Name("state").Equal(expression.Value(avS(string(s))))
	var upd expression.UpdateBuilder
	if want == "" {
		upd = upd.Remove(expression.Name(AttrStateShard))
	} else {
		upd = upd.Set(expression.Name(AttrStateShard), expression.Value(avS(want)))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return
	}
	out, err := st.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 st.table(TableActivityExec),
		Key:                       item{"activity_exec_id": avS(string(id)), "workflow_exec_id": avS(string(wf))},
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
		st.log.Warn("could not put an activity under its state's shard; the next read tries again", "activity_exec_id", string(id), "error", err)
	default:
		st.report("Restamp", reportOne(out.ConsumedCapacity)...)
	}
}

// ActivitiesInState implements state.Store: it queries every shard of the
// state in parallel and merges them by state time, oldest first.
func (st *Store) ActivitiesInState(ctx context.Context, q state.ActivityQuery) ([]state.ActivityRef, error) {
	if !q.State.Valid() || q.State.Terminal() {
		return nil, fmt.Errorf("list %s activities: the state index holds live states only", q.State)
	}
	type result struct {
		refs []state.ActivityRef
		err  error
	}
	results := make([]result, StateShards)
	var wg sync.WaitGroup
	for n := range StateShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[n].refs, results[n].err = st.shardRefs(ctx, q, string(q.State)+"#"+strconv.Itoa(n))
		}()
	}
	wg.Wait()
	var out []state.ActivityRef
	var errs []error
	for _, r := range results {
		out = append(out, r.refs...)
		if _, other := state.Skipped(r.err); other != nil {
			if strings.Contains(other.Error(), "does not have the specified index") {
				return nil, fmt.Errorf("list %s activities: table %s has no index %s (it was installed before schema version 3): run `whimbrel install`, which adds it: %w",
					q.State, st.prefix+TableActivityExec, indexStateShard, other)
			}
			return nil, fmt.Errorf("list %s activities: %w", q.State, other)
		}
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StateTime.Equal(out[j].StateTime) {
			return out[i].StateTime.Before(out[j].StateTime)
		}
		return out[i].ActivityExecID < out[j].ActivityExecID
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, joinSkipped(errs)
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

// backfillShards puts the live items that writers older than the sharded
// index wrote under their shards, reading them from the legacy state index
// (keys only) when the table still has it. Repeating it finds nothing to do.
func (st *Store) backfillShards(ctx context.Context, desc *types.TableDescription, dryRun bool) (*state.InstallAction, error) {
	legacy := false
	for _, g := range desc.GlobalSecondaryIndexes {
		legacy = legacy || aws.ToString(g.IndexName) == indexLegacyState
	}
	if !legacy {
		return nil, nil
	}
	name := aws.ToString(desc.TableName)
	var keys []item
	for _, s := range state.ActivityStates {
		if s.Terminal() {
			continue
		}
		err := st.query(ctx, "Install", &dynamodb.QueryInput{
			TableName:                 aws.String(name),
			IndexName:                 aws.String(indexLegacyState),
			KeyConditionExpression:    aws.String("#s = :s"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(string(s))},
		}, 0, func(m item) error {
			keys = append(keys, item{"activity_exec_id": m["activity_exec_id"], "workflow_exec_id": m["workflow_exec_id"]})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list live activities of %s to shard them: %w", name, err)
		}
	}
	var todo []attr.Item
	err := st.batchGet(ctx, TableActivityExec, keys, func(m item) error {
		it := fromAVItem(m)
		id, _ := it["activity_exec_id"].(attr.S)
		s, _ := it["state"].(attr.S)
		if want := StateShard(string(id), state.ActivityState(s)); want != "" && it[AttrStateShard] != attr.S(want) {
			todo = append(todo, it)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read live activities of %s to shard them: %w", name, err)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	act := &state.InstallAction{Object: "table " + name, Action: fmt.Sprintf("put %d live activities under their %s", len(todo), AttrStateShard)}
	if dryRun {
		return act, nil
	}
	for _, it := range todo {
		st.restamp(ctx, it)
	}
	return act, nil
}

// shardsDescription is what install_status records of the state index.
func shardsDescription() string {
	return fmt.Sprintf("state index %s in %d shards a state (%s = STATE#n)", indexStateShard, StateShards, AttrStateShard)
}
