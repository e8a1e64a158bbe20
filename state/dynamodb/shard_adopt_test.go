package dynamodb_test

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// movingAPI moves an item to another state, behind the store's back, after
// the adoption scan read it and before the store stamps it.
type movingAPI struct {
	dynamodb.API
	armed atomic.Bool
	move  func(ctx context.Context)
}

func (m *movingAPI) Scan(ctx context.Context, in *awsdynamodb.ScanInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.ScanOutput, error) {
	out, err := m.API.Scan(ctx, in, opts...)
	if err == nil && strings.HasSuffix(aws.ToString(in.TableName), dynamodb.TableActivityExec) && m.armed.CompareAndSwap(true, false) {
		m.move(ctx)
	}
	return out, err
}

// shardOf reads the state_shard an item carries ("" for none).
func shardOf(t *testing.T, client *awsdynamodb.Client, table string, key map[string]types.AttributeValue) string {
	t.Helper()
	out, err := client.GetItem(context.Background(), &awsdynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("read %s: %v (item %v)", table, err, out)
	}
	v, _ := out.Item[dynamodb.AttrStateShard].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func activityKeyAV(t *testing.T, k state.ActivityKey) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"activity_exec_id": toAV(t, k.ActivityExecID), "workflow_exec_id": toAV(t, k.WorkflowExecID)}
}

// TestAdoptServesForeignItems: items a Full Logic API client wrote raw (the
// base contract's attributes only: no shards) are listed after an adoption pass; an
// item that moved between the scan and the stamp is not put under the
// shard of the state it left (the next pass puts it under its new one); an
// ended activity is left alone; a pass over stamped items writes nothing.
func TestAdoptServesForeignItems(t *testing.T) {
	t.Parallel()
	var log capacityLog
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: log.record})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := dynamotest.Client(t)
	prefix := st.Prefix()
	now := time.Now().Truncate(time.Second) // whole seconds, as a foreign client writes them

	wf := putRawWorkflow(t, client, prefix, uuid.NewString(), state.WorkflowRunning, now)
	ready := putRaw(t, client, prefix, wf, "ready", state.Ready, now)
	moving := putRaw(t, client, prefix, wf, "moving", state.Ready, now)
	done := putRaw(t, client, prefix, wf, "done", state.Completed, now)
	if slices.Contains(listedWorkflows(t, st, state.WorkflowQuery{State: state.WorkflowRunning}), wf) || slices.Contains(listed(t, st, state.Ready), ready.ActivityExecID) {
		t.Fatal("raw items are listed before any adoption: the test proves nothing")
	}

	// The adopter's scan reads "moving" READY; then its client moves it.
	api := &movingAPI{API: client, move: func(ctx context.Context) {
		if _, err := client.UpdateItem(ctx, &awsdynamodb.UpdateItemInput{
			TableName: aws.String(prefix + dynamodb.TableActivityExec), Key: activityKeyAV(t, moving),
			UpdateExpression:          aws.String("SET #s = :r"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": toAV(t, string(state.Running))},
		}); err != nil {
			t.Errorf("move the item behind the adopter's back: %v", err)
		}
	}}
	adopter := dynamodb.New(api, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	api.armed.Store(true)
	n, err := adopter.Adopt(ctx, 1)
	if err != nil || n != 2 {
		t.Fatalf("Adopt: %d stamped, %v; want the workflow and the READY activity (the moved one refused)", n, err)
	}
	if !slices.Contains(listedWorkflows(t, st, state.WorkflowQuery{State: state.WorkflowRunning}), wf) {
		t.Errorf("the raw RUNNING workflow is not listed after adoption")
	}
	if got := listed(t, st, state.Ready); !slices.Contains(got, ready.ActivityExecID) || slices.Contains(got, moving.ActivityExecID) {
		t.Errorf("READY after adoption: %v; want %s and not the one that moved to RUNNING", got, ready.ActivityExecID)
	}
	if s := shardOf(t, client, prefix+dynamodb.TableActivityExec, activityKeyAV(t, moving)); s != "" {
		t.Errorf("the item that moved between the scan and the stamp carries %q; want no shard (not its old state's)", s)
	}
	if s := shardOf(t, client, prefix+dynamodb.TableActivityExec, activityKeyAV(t, done)); s != "" {
		t.Errorf("the COMPLETED activity was stamped %q; ended activities stay out of the index", s)
	}

	// The next pass (the cursor wrapped round) puts it under RUNNING's.
	if n, err := adopter.Adopt(ctx, 1); err != nil || n != 1 {
		t.Fatalf("second Adopt: %d stamped, %v; want the moved activity", n, err)
	}
	if !slices.Contains(listed(t, st, state.Running), moving.ActivityExecID) {
		t.Errorf("the moved activity is not listed RUNNING after the next pass")
	}

	log.take()
	if n, err := st.Adopt(ctx, 4); err != nil || n != 0 {
		t.Errorf("a pass over stamped items: %d stamped, %v; want none", n, err)
	}
	for _, c := range log.take() {
		if c.Op != "Adopt" {
			t.Errorf("a pass over stamped items called %s (%+v): want only its scans", c.Op, c)
		}
	}
}

// TestAdoptIdleCost measures what an adoption pass costs over a table of
// Whimbrel's own items (nothing to stamp): the read units of its scans,
// and no write. BENCHMARKS.md quotes the figure.
func TestAdoptIdleCost(t *testing.T) {
	t.Parallel()
	var log capacityLog
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: log.record})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 2000
	if err := st.CreateWorkflow(ctx, wideWorkflow(t, "idle", n-1)); err != nil {
		t.Fatal(err)
	}
	log.take()
	pages := n/dynamodb.AdoptPageItems + 1
	stamped, err := st.Adopt(ctx, pages)
	if err != nil || stamped != 0 {
		t.Fatalf("Adopt over Whimbrel's own items: %d stamped, %v; want none", stamped, err)
	}
	var reads float64
	scans := 0
	for _, c := range log.take() {
		if c.Op != "Adopt" {
			t.Errorf("an idle pass called %s (%+v): want only its scans", c.Op, c)
		}
		reads += c.Total
		scans++
	}
	if scans < 1+n/dynamodb.AdoptPageItems || reads <= 0 {
		t.Errorf("an idle pass over %d activities made %d scans reading %.1f units: want a page a %d items, and the units reported",
			n, scans, reads, dynamodb.AdoptPageItems)
	}
	t.Logf("idle adoption pass over 1 workflow and %d activities: %d scans, %.1f read units (%.2f per 1,000 items)", n, scans, reads, reads*1000/float64(n+1))
}
