package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/cenkalti/backoff/v4"

	"github.com/whimbrel/whimbrel/state/internal/attr"
)

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
