package dynamotest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// proxied installs the tables through the proxy's clean side and returns
// the prefix.
func proxied(t *testing.T, p *dynamotest.FaultProxy) string {
	t.Helper()
	prefix := dynamotest.Prefix(t)
	st := dynamodb.New(p.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	return prefix
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// indexed lists what the workflow state index holds under one shard, with
// the state each entry carries.
func indexed(t *testing.T, c *awsdynamodb.Client, table, shard string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var start map[string]types.AttributeValue
	for {
		page, err := c.Query(context.Background(), &awsdynamodb.QueryInput{
			TableName: aws.String(table), IndexName: aws.String("state-shard-index"),
			KeyConditionExpression:    aws.String("#k = :v"),
			ExpressionAttributeNames:  map[string]string{"#k": dynamodb.AttrStateShard},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": s(shard)},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			out[it["workflow_exec_id"].(*types.AttributeValueMemberS).Value] = it["state"].(*types.AttributeValueMemberS).Value
		}
		if start = page.LastEvaluatedKey; start == nil {
			return out
		}
	}
}

// TestFaultProxyLagsIndexes: an item written through the proxy appears in
// an index only after the lag, leaves it late, and meanwhile carries the
// projected attributes of its older version; the table itself (a
// consistent read) shows the write at once.
func TestFaultProxyLagsIndexes(t *testing.T) {
	lag := 3 * time.Second
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{IndexLag: lag})
	prefix := proxied(t, p)
	c := p.Client(false)
	ctx := context.Background()
	table := prefix + dynamodb.TableWorkflowExec
	put := func(id, st, shard string) {
		_, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"workflow_exec_id": s(id), "workflow_name": s("w"), "state": s(st), dynamodb.AttrStateShard: s(shard),
			"start_time_epoch": n("1700000000"),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("w::1", "RUNNING", "RUNNING#1")
	if got := indexed(t, c, table, "RUNNING#1"); len(got) != 0 {
		t.Errorf("a fresh item is in the index at once: %v", got)
	}
	time.Sleep(lag + 200*time.Millisecond)
	if got := indexed(t, c, table, "RUNNING#1"); got["w::1"] != "RUNNING" {
		t.Errorf("after the lag, the index holds %v, want w::1 RUNNING", got)
	}
	// A change of projected attribute and a move to another key.
	_, err := c.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:                       map[string]types.AttributeValue{"workflow_exec_id": s("w::1"), "workflow_name": s("w")},
		UpdateExpression:          aws.String("SET #s = :s, #k = :k"),
		ExpressionAttributeNames:  map[string]string{"#s": "state", "#k": dynamodb.AttrStateShard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": s("COMPLETED"), ":k": s("COMPLETED#1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"workflow_exec_id": s("w::1"), "workflow_name": s("w")}})
	if err != nil || got.Item["state"].(*types.AttributeValueMemberS).Value != "COMPLETED" {
		t.Fatalf("a consistent read after the update: %v %v", got, err)
	}
	if got := indexed(t, c, table, "RUNNING#1"); got["w::1"] != "RUNNING" {
		t.Errorf("right after the move, the old key holds %v, want w::1 still RUNNING (it leaves late)", got)
	}
	if got := indexed(t, c, table, "COMPLETED#1"); len(got) != 0 {
		t.Errorf("right after the move, the new key holds %v, want nothing yet", got)
	}
	time.Sleep(lag + 200*time.Millisecond)
	if got := indexed(t, c, table, "RUNNING#1"); len(got) != 0 {
		t.Errorf("after the lag, the old key still holds %v", got)
	}
	if got := indexed(t, c, table, "COMPLETED#1"); got["w::1"] != "COMPLETED" {
		t.Errorf("after the lag, the new key holds %v, want w::1 COMPLETED", got)
	}
	if st := p.Stats(); st.StaleReads == 0 || st.Unlagged != 0 {
		t.Errorf("stats: %s", st)
	}
}

// TestFaultProxyPagesAndBatches: with pages of 5 items and every batch
// half unprocessed, the store still reads all of a workflow's activities
// (its queries follow LastEvaluatedKey, its batch reads retry what is left).
func TestFaultProxyPagesAndBatches(t *testing.T) {
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{PageSize: 5, PartialBatches: true})
	prefix := proxied(t, p)
	c := p.Client(false)
	ctx := context.Background()
	for i := range 23 {
		_, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(prefix + dynamodb.TableActivityExec), Item: map[string]types.AttributeValue{
			"activity_exec_id": s(fmt.Sprintf("a%02d::x", i)), "workflow_exec_id": s("w::1"), "workflow_name": s("w"),
			"activity_name": s(fmt.Sprintf("a%02d", i)), "state": s("REQUESTED"), "state_time": &types.AttributeValueMemberL{},
			"state_time_epoch": n("1700000000"),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	st := dynamodb.New(c, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	keys, err := st.AnyLive(ctx, "w::1")
	if err != nil || !keys {
		t.Fatalf("AnyLive: %v %v", keys, err)
	}
	out, err := c.BatchGetItem(ctx, &awsdynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		prefix + dynamodb.TableActivityExec: {Keys: []map[string]types.AttributeValue{
			{"activity_exec_id": s("a00::x"), "workflow_exec_id": s("w::1")},
			{"activity_exec_id": s("a01::x"), "workflow_exec_id": s("w::1")},
			{"activity_exec_id": s("a02::x"), "workflow_exec_id": s("w::1")},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, left := len(out.Responses[prefix+dynamodb.TableActivityExec]), len(out.UnprocessedKeys[prefix+dynamodb.TableActivityExec].Keys); got != 2 || left != 1 {
		t.Errorf("a batch of 3: %d read, %d unprocessed; want 2 and 1", got, left)
	}
	// Pages of the index as it stands (forwarded with a Limit), and of
	// the lagging view (cut by the proxy).
	for _, f := range []dynamotest.Faults{{PageSize: 5}, {PageSize: 5, IndexLag: time.Second}} {
		p.SetFaults(f)
		queryPages(t, c, prefix)
	}
	if s := p.Stats(); s.Paged == 0 || s.PartialBatches == 0 || s.IndexReads == 0 {
		t.Errorf("stats: %s", s)
	}
}

func queryPages(t *testing.T, c *awsdynamodb.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	var all int
	var start map[string]types.AttributeValue
	pages := 0
	seen := map[string]bool{}
	for {
		page, err := c.Query(ctx, &awsdynamodb.QueryInput{TableName: aws.String(prefix + dynamodb.TableActivityExec), IndexName: aws.String("workflow-index"),
			KeyConditionExpression:    aws.String("workflow_exec_id = :w"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":w": s("w::1")}, ExclusiveStartKey: start})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Items) > 5 {
			t.Errorf("a page of %d items", len(page.Items))
		}
		all += len(page.Items)
		for _, it := range page.Items {
			seen[it["activity_exec_id"].(*types.AttributeValueMemberS).Value] = true
		}
		if start = page.LastEvaluatedKey; start == nil {
			break
		}
	}
	if all != 23 || len(seen) != 23 || pages < 5 {
		t.Errorf("%d items (%d different) in %d pages; want 23 in at least 5", all, len(seen), pages)
	}
}

// TestFaultProxyErrors: throttles and 500s come back as the SDK's errors
// once its retries are spent; a 500 after the write leaves the write
// applied; a cancelled transaction writes nothing.
func TestFaultProxyErrors(t *testing.T) {
	p := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{})
	prefix := proxied(t, p)
	c := p.Client(false)
	ctx := context.Background()
	table := prefix + dynamodb.TableWorkflowLambda
	get := func() bool {
		out, err := p.Client(true).GetItem(ctx, &awsdynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"workflow_name": s("x")}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	putX := func() error {
		_, err := c.PutItem(ctx, &awsdynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"workflow_name": s("x")}})
		return err
	}

	p.SetFaults(dynamotest.Faults{Throttle: 1})
	var pte *types.ProvisionedThroughputExceededException
	err := putX()
	if err == nil || get() {
		t.Errorf("throttled: %v, written %v; want an error and nothing written", err, get())
	}
	t.Logf("throttled: %v (ProvisionedThroughputExceededException: %v)", err, errors.As(err, &pte))

	p.SetFaults(dynamotest.Faults{Errors: 1, AfterWrite: 1})
	if err := putX(); err == nil || !get() {
		t.Errorf("500 after the write: %v, written %v; want an error and the item written", err, get())
	}

	p.SetFaults(dynamotest.Faults{Conflicts: 1})
	_, err = c.TransactWriteItems(ctx, &awsdynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"workflow_name": s("y")}}},
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"workflow_name": s("z")}}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "TransactionConflict" {
		t.Errorf("a conflicted transaction: %v", err)
	}
	if s := p.Stats(); s.Throttled == 0 || s.ErrorsAfterWrite == 0 || s.Conflicts == 0 {
		t.Errorf("stats: %s", s)
	}
}
