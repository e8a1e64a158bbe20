package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Pools: state.PoolStore on DynamoDB.

var _ state.PoolStore = (*Store)(nil)

// poolTable is the pool table's definition, kept beside what reads and
// writes it; tableDefs lists it with the others, and Install creates it
// with them. It has no index: a launcher reads one pool with one query
// on its hash key.
var poolTable = tableDef{base: state.TablePool,
	description: "pools: each one's definition (entry pool) and its slot shards (entry slots/<n>) with their holders",
	hash:        s("pool_name"), rng: ps("entry")}

// PoolItems implements state.PoolStore: one consistent query.
func (st *Store) PoolItems(ctx context.Context, name string) (*state.Pool, []*state.PoolShard, error) {
	in := &dynamodb.QueryInput{
		TableName:                 st.table(state.TablePool),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("pool_name = :n"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": avS(name)},
	}
	var p *state.Pool
	var shards []*state.PoolShard
	table := st.prefix + state.TablePool
	err := st.query(ctx, "PoolItems", in, 0, func(m item) error {
		it := fromAVItem(m)
		if e, _ := it["entry"].(attr.S); string(e) == attr.EntryPool {
			var err error
			p, err = attr.DecodePool(table, it)
			return err
		}
		// A malformed item fails the read: a shard left out would let
		// in more holders than the pool's size.
		s, err := attr.DecodePoolShard(table, it)
		if err != nil {
			return err
		}
		shards = append(shards, s)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read pool %s: %w", name, err)
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i].Index < shards[j].Index })
	return p, shards, nil
}

// PutPool implements state.PoolStore.
func (st *Store) PutPool(ctx context.Context, p *state.Pool, prev int) error {
	next := *p
	next.Version = prev + 1
	if err := st.putVersioned(ctx, "PutPool", p.Name, attr.EntryPool, prev, attr.EncodePool(&next)); err != nil {
		return err
	}
	p.Version = next.Version
	return nil
}

// PutPoolShard implements state.PoolStore.
func (st *Store) PutPoolShard(ctx context.Context, s *state.PoolShard, prev int) error {
	next := *s
	next.Version = prev + 1
	if err := st.putVersioned(ctx, "PutPoolShard", s.Pool, attr.SlotsEntry(s.Index), prev, attr.EncodePoolShard(&next)); err != nil {
		return err
	}
	s.Version = next.Version
	return nil
}

// putVersioned writes a pool item if the stored one is at version prev
// (0: absent).
func (st *Store) putVersioned(ctx context.Context, op, name, entry string, prev int, it attr.Item) error {
	in := &dynamodb.PutItemInput{
		TableName:                           st.table(state.TablePool),
		Item:                                toAVItem(it),
		ConditionExpression:                 aws.String("attribute_not_exists(pool_name)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              st.returnCapacity(),
	}
	if prev > 0 {
		in.ConditionExpression = aws.String("version = :v")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": avN(strconv.Itoa(prev))}
	}
	out, err := st.api.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return attr.PoolConflict(name, entry, prev, nilIfEmpty(ccf.Item))
	case err != nil:
		return fmt.Errorf("put pool %s %s: %w", name, entry, err)
	}
	st.report(op, reportOne(out.ConsumedCapacity)...)
	return nil
}

// DeletePool implements state.PoolStore: the definition, conditionally,
// then the shards. A deleter that dies in between leaves shards without a
// definition, which every reader takes for an undefined pool, and which
// the next pool set adopts.
func (st *Store) DeletePool(ctx context.Context, name string) error {
	out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
			TableName:           st.table(state.TablePool),
			Key:                 item{"pool_name": avS(name), "entry": avS(attr.EntryPool)},
			ConditionExpression: aws.String("attribute_exists(pool_name)"),
		}}},
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	var tc *types.TransactionCanceledException
	switch {
	case errors.As(err, &tc) && len(tc.CancellationReasons) == 1 &&
		aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed":
		return &state.NotFoundError{Kind: "pool", ID: name}
	case err != nil:
		return fmt.Errorf("delete pool %s: %w", name, err)
	}
	st.report("DeletePool", out.ConsumedCapacity...)
	_, shards, err := st.PoolItems(ctx, name)
	if err != nil {
		return fmt.Errorf("delete pool %s: %w", name, err)
	}
	for len(shards) > 0 {
		n := min(len(shards), 100)
		var del []types.TransactWriteItem
		for _, s := range shards[:n] {
			del = append(del, types.TransactWriteItem{Delete: &types.Delete{TableName: st.table(state.TablePool),
				Key: item{"pool_name": avS(name), "entry": avS(attr.SlotsEntry(s.Index))}}})
		}
		out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: del, ReturnConsumedCapacity: st.returnCapacity()})
		if err != nil {
			return fmt.Errorf("delete pool %s: %w", name, err)
		}
		st.report("DeletePool", out.ConsumedCapacity...)
		shards = shards[n:]
	}
	return nil
}

// ListPools implements state.PoolStore, with a scan: it serves the
// operator's listing, never a launcher's pass. A pool that cannot be
// decoded is left out and named in a *state.SkippedError.
func (st *Store) ListPools(ctx context.Context) ([]*state.Pool, error) {
	var out []*state.Pool
	skips := st.undecoded.NewSkips()
	p := dynamodb.NewScanPaginator(st.api, &dynamodb.ScanInput{
		TableName: st.table(state.TablePool), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("#e = :p"),
		ExpressionAttributeNames:  map[string]string{"#e": "entry"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": avS(attr.EntryPool)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list pools: %w", err)
		}
		for _, m := range page.Items {
			pl, err := attr.DecodePool(st.prefix+state.TablePool, fromAVItem(m))
			if err != nil {
				_ = skips.Add(err)
				continue
			}
			out = append(out, pl)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, skips.Err()
}
