package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/internal/attr"
)

// Schedules: state.Schedules on DynamoDB.

// TableSchedule holds the schedules (entry "schedule") and the upstream
// executions their token triggers counted (entry "token/<id>").
const TableSchedule = "schedule"

// indexDue (schedule): due_shard + next_fire_epoch, keys only. Only a
// schedule with a next fire time has due_shard, so the index is sparse: a
// scheduler's query reads the due schedules and nothing else.
const indexDue = "due-index"

var _ state.Schedules = (*Store)(nil)

// scheduleTable is the schedule table's definition, kept beside what reads
// and writes it; tableDefs lists it with the others, and Install creates
// it with them.
var scheduleTable = tableDef{base: TableSchedule, ttl: true,
	description: "schedules, and the upstream executions their token triggers counted",
	hash:        s("schedule_name"), rng: ps("entry"),
	indexes: []index{
		{name: indexDue, hash: s("due_shard"), rng: pn("next_fire_epoch"), projection: types.ProjectionTypeKeysOnly},
	}}

func scheduleKey(name, entry string) item {
	return item{"schedule_name": avS(name), "entry": avS(entry)}
}

// PutSchedule implements state.Schedules.
func (st *Store) PutSchedule(ctx context.Context, s *state.Schedule, prev int, token string) error {
	if s.Name == "" {
		return errors.New("put schedule: it needs a name")
	}
	next := *s
	next.Version = prev + 1
	put := &types.Put{
		TableName:                           st.table(TableSchedule),
		Item:                                toAVItem(attr.EncodeSchedule(&next)),
		ConditionExpression:                 aws.String("attribute_not_exists(schedule_name)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if prev > 0 {
		put.ConditionExpression = aws.String("version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": avN(strconv.Itoa(prev))}
	}
	if token == "" {
		out, err := st.api.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
			ExpressionAttributeValues:           put.ExpressionAttributeValues,
			ReturnValuesOnConditionCheckFailure: put.ReturnValuesOnConditionCheckFailure,
			ReturnConsumedCapacity:              st.returnCapacity(),
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			return scheduleConflict(s.Name, prev, nilIfEmpty(ccf.Item))
		case err != nil:
			return fmt.Errorf("put schedule %s: %w", s.Name, err)
		}
		st.report("PutSchedule", reportOne(out.ConsumedCapacity)...)
		s.Version = next.Version
		return nil
	}
	out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Put: put}, {Put: &types.Put{
			TableName:           st.table(TableSchedule),
			Item:                toAVItem(attr.EncodeToken(s.Name, token, state.Truncate(time.Now()))),
			ConditionExpression: aws.String("attribute_not_exists(schedule_name)"),
		}}},
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	var tc *types.TransactionCanceledException
	switch {
	case errors.As(err, &tc) && len(tc.CancellationReasons) == 2:
		if aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
			return scheduleConflict(s.Name, prev, fromAVItem(tc.CancellationReasons[0].Item))
		}
		if aws.ToString(tc.CancellationReasons[1].Code) == "ConditionalCheckFailed" {
			return &state.ExistsError{What: fmt.Sprintf("token of %s for schedule %s", token, s.Name)}
		}
		return fmt.Errorf("put schedule %s with token %s: %w", s.Name, token, err)
	case err != nil:
		return fmt.Errorf("put schedule %s with token %s: %w", s.Name, token, err)
	}
	st.report("PutSchedule", out.ConsumedCapacity...)
	s.Version = next.Version
	return nil
}

// scheduleConflict says what the schedule held instead of version prev.
func scheduleConflict(name string, prev int, old attr.Item) error {
	want := fmt.Sprintf("version %d", prev)
	if prev == 0 {
		want = "no schedule yet"
	}
	got := "absent"
	if v, ok := old["version"].(attr.N); ok {
		got = "at version " + string(v)
	}
	return &state.ConflictError{Kind: "schedule", ID: name, Want: want, State: got}
}

// GetSchedule implements state.Schedules.
func (st *Store) GetSchedule(ctx context.Context, name string) (*state.Schedule, error) {
	m, err := st.get(ctx, "GetSchedule", TableSchedule, scheduleKey(name, attr.EntrySchedule))
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	if m == nil {
		return nil, &state.NotFoundError{Kind: "schedule", ID: name}
	}
	return attr.DecodeSchedule(st.prefix+TableSchedule, m)
}

// DeleteSchedule implements state.Schedules: the schedule, conditionally,
// then the token items it counted. A deleter that dies in between leaves
// tokens that expire by TTL (state.TokenRetention).
func (st *Store) DeleteSchedule(ctx context.Context, name string, prev int) error {
	out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
			TableName:                           st.table(TableSchedule),
			Key:                                 scheduleKey(name, attr.EntrySchedule),
			ConditionExpression:                 aws.String("version = :v"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":v": avN(strconv.Itoa(prev))},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}},
		ReturnConsumedCapacity: st.returnCapacity(),
	})
	var tc *types.TransactionCanceledException
	switch {
	case errors.As(err, &tc) && len(tc.CancellationReasons) == 1 &&
		aws.ToString(tc.CancellationReasons[0].Code) == "ConditionalCheckFailed":
		if len(tc.CancellationReasons[0].Item) == 0 {
			return &state.NotFoundError{Kind: "schedule", ID: name}
		}
		return scheduleConflict(name, prev, fromAVItem(tc.CancellationReasons[0].Item))
	case err != nil:
		return fmt.Errorf("delete schedule %s: %w", name, err)
	}
	st.report("DeleteSchedule", out.ConsumedCapacity...)
	return st.deleteTokens(ctx, name)
}

// deleteTokens deletes the token items of a schedule, 100 to a
// transaction.
func (st *Store) deleteTokens(ctx context.Context, name string) error {
	var keys []item
	in := &dynamodb.QueryInput{
		TableName:                 st.table(TableSchedule),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("schedule_name = :n AND begins_with(#e, :t)"),
		ExpressionAttributeNames:  map[string]string{"#e": "entry"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": avS(name), ":t": avS(attr.TokenPrefix)},
		ProjectionExpression:      aws.String("schedule_name, #e"),
	}
	err := st.query(ctx, "ScheduleTokens", in, 0, func(m item) error {
		keys = append(keys, m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete the tokens of schedule %s: %w", name, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 100)
		var del []types.TransactWriteItem
		for _, k := range keys[:n] {
			del = append(del, types.TransactWriteItem{Delete: &types.Delete{TableName: st.table(TableSchedule), Key: k}})
		}
		out, err := st.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: del, ReturnConsumedCapacity: st.returnCapacity()})
		if err != nil {
			return fmt.Errorf("delete the tokens of schedule %s: %w", name, err)
		}
		st.report("DeleteSchedule", out.ConsumedCapacity...)
		keys = keys[n:]
	}
	return nil
}

// Schedules implements state.Schedules, with a scan: it serves the
// operator's listing, never a scheduler's tick.
//
// A schedule that cannot be decoded is left out and named in a
// *state.SkippedError.
func (st *Store) Schedules(ctx context.Context) ([]*state.Schedule, error) {
	var out []*state.Schedule
	skips := st.undecoded.NewSkips()
	p := dynamodb.NewScanPaginator(st.api, &dynamodb.ScanInput{
		TableName: st.table(TableSchedule), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("#e = :s"),
		ExpressionAttributeNames:  map[string]string{"#e": "entry"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(attr.EntrySchedule)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		for _, m := range page.Items {
			s, err := attr.DecodeSchedule(st.prefix+TableSchedule, fromAVItem(m))
			if err != nil {
				_ = skips.Add(err) // a decode error: reported, and kept
				continue
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, skips.Err()
}

// DueSchedules implements state.Schedules: one query per shard of the
// sparse due index.
func (st *Store) DueSchedules(ctx context.Context, now time.Time) ([]string, error) {
	var out []string
	for i := 0; i < state.ScheduleShards; i++ {
		in := &dynamodb.QueryInput{
			TableName:                 st.table(TableSchedule),
			IndexName:                 aws.String(indexDue),
			KeyConditionExpression:    aws.String("due_shard = :s AND next_fire_epoch <= :t"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":s": avS(attr.ShardName(i)), ":t": toAV(attr.Epoch(now))},
		}
		err := st.query(ctx, "DueSchedules", in, 0, func(m item) error {
			if v, ok := m["schedule_name"].(*types.AttributeValueMemberS); ok {
				out = append(out, v.Value)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list due schedules: %w", err)
		}
	}
	sort.Strings(out)
	return out, nil
}
