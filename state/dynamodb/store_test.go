package dynamodb_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) state.Store { return dynamotest.NewStore(t, dynamodb.Options{}) },
		PutForeignActivity: func(t *testing.T, st state.Store, attrs map[string]any) {
			t.Helper()
			m := map[string]types.AttributeValue{}
			for k, v := range attrs {
				m[k] = toAV(t, v)
			}
			_, err := dynamotest.Client(t).PutItem(context.Background(), &awsdynamodb.PutItemInput{
				TableName: aws.String(st.(*dynamodb.Store).Prefix() + dynamodb.TableActivityExec),
				Item:      m,
			})
			if err != nil {
				t.Fatalf("put foreign item: %v", err)
			}
		},
	})
}

func toAV(t *testing.T, v any) types.AttributeValue {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}
	case int:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(v)}
	case float64:
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'g', -1, 64)}
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}
	case []string:
		return &types.AttributeValueMemberSS{Value: v}
	case []any:
		var l []types.AttributeValue
		for _, e := range v {
			l = append(l, toAV(t, e))
		}
		return &types.AttributeValueMemberL{Value: l}
	}
	t.Fatalf("toAV: unsupported %T", v)
	return nil
}

// capacityLog collects what each call consumed.
type capacityLog struct {
	mu  sync.Mutex
	ops []dynamodb.Capacity
}

func (c *capacityLog) record(cc dynamodb.Capacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, cc)
}

func (c *capacityLog) take() []dynamodb.Capacity {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.ops
	c.ops = nil
	return out
}

// TestHeartbeatCostsOneWriteUnit checks the budget of DESIGN.md: a heartbeat
// touches no index and costs exactly one write unit, even on an item that
// carries everything a running activity records.
func TestHeartbeatCostsOneWriteUnit(t *testing.T) {
	t.Parallel()
	var log capacityLog
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: log.record})
	ctx := context.Background()

	execID := state.NewWorkflowExecID("cost")
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(execID, "work"), WorkflowExecID: execID}
	now := time.Now()
	if err := st.CreateWorkflow(ctx, &state.NewWorkflow{
		Exec: state.WorkflowExec{WorkflowExecID: execID, WorkflowName: "cost", State: state.WorkflowRequested, StartTime: now},
		Activities: []state.ActivityExec{{ActivityKey: k, WorkflowName: "cost", ActivityName: "work",
			State: state.Requested, StateTime: now, PendingDependencies: []string{state.ActivityExecIDFor(execID, "earlier")}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Ready},
		{From: []state.ActivityState{state.Ready}, To: state.Queued, LaunchedAs: "arn:aws:ecs:eu-west-1:123456789012:task/cluster/0123456789abcdef0123456789abcdef"},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{
			Owner: "3f1d5c1e-8a59-4c7c-9d1e-3a3b9f0c2d11", Host: "ip-10-0-12-34.eu-west-1.compute.internal", PID: 1,
			HeartbeatEnabled: true, HeartbeatInterval: 15 * time.Second, HeartbeatTimeout: time.Minute}},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	log.take()

	for i := 0; i < 3; i++ {
		if err := st.Heartbeat(ctx, k, "3f1d5c1e-8a59-4c7c-9d1e-3a3b9f0c2d11", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	got := log.take()
	if len(got) != 3 {
		t.Fatalf("got %d capacity reports for 3 heartbeats", len(got))
	}
	for _, c := range got {
		if c.Op != "Heartbeat" || c.Total != 1 || c.Table != 1 || len(c.Indexes) != 0 {
			t.Errorf("heartbeat consumed %+v, want exactly 1 write unit on the table and none on any index", c)
		}
	}
}

func TestInstall(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	prefix := dynamotest.Prefix(t)
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix})
	ctx := context.Background()

	// A dry run says what it would do and creates nothing.
	plan, err := st.Install(ctx, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := count(plan, "create"); n != 7 {
		t.Errorf("dry run plans %d creates, want 7: %v", n, plan)
	}
	if _, err := client.DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(prefix + "workflow_exec")}); err == nil {
		t.Fatal("dry run created a table")
	}

	did, err := st.Install(ctx, false)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if count(did, "create") != 7 || count(did, "record version 1") != 7 {
		t.Errorf("install did %v, want 7 creates and 7 versions recorded", did)
	}

	// The key schemas are DESIGN.md's.
	want := map[string]string{
		"install_status":           "object_id HASH, object_type RANGE",
		"workflow_request":         "workflow_request_id HASH, workflow_name RANGE",
		"activity_event":           "activity_event_id HASH, activity_exec_id RANGE",
		"workflow_exec":            "workflow_exec_id HASH, workflow_name RANGE",
		"activity_exec":            "activity_exec_id HASH, workflow_exec_id RANGE",
		"activity_exec_dependency": "activity_exec_dependency HASH, activity_exec_id RANGE",
		"workflow_lambda":          "workflow_name HASH",
	}
	wantIndexes := map[string]string{
		"workflow_exec":            "name-index(workflow_name HASH, start_time_epoch RANGE) state-index(state HASH, start_time_epoch RANGE)",
		"activity_exec":            "state-index(state HASH, state_time_epoch RANGE) workflow-index(workflow_exec_id HASH, activity_exec_id RANGE)",
		"activity_exec_dependency": "dependent-index(dependent_activity_exec_id HASH) workflow-index(workflow_exec_id HASH)",
	}
	for base, keys := range want {
		out, err := client.DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(prefix + base)})
		if err != nil {
			t.Fatalf("describe %s: %v", base, err)
		}
		if got := describeKeys(out.Table.KeySchema); got != keys {
			t.Errorf("%s keys: %s, want %s", base, got, keys)
		}
		if out.Table.TableStatus != types.TableStatusActive {
			t.Errorf("%s is %s, want ACTIVE", base, out.Table.TableStatus)
		}
		var ix []string
		for _, g := range out.Table.GlobalSecondaryIndexes {
			ix = append(ix, fmt.Sprintf("%s(%s)", aws.ToString(g.IndexName), describeKeys(g.KeySchema)))
		}
		sort.Strings(ix)
		if got := strings.Join(ix, " "); got != wantIndexes[base] {
			t.Errorf("%s indexes: %s, want %s", base, got, wantIndexes[base])
		}
	}

	// The second run changes nothing.
	again, err := st.Install(ctx, false)
	if err != nil {
		t.Fatalf("second install: %v", err)
	}
	if len(again) != 0 {
		t.Errorf("second install did %v, want nothing", again)
	}
	// The versions are recorded.
	out, err := client.GetItem(ctx, &awsdynamodb.GetItemInput{
		TableName: aws.String(prefix + "install_status"),
		Key: map[string]types.AttributeValue{
			"object_id": &types.AttributeValueMemberS{Value: "activity_exec"}, "object_type": &types.AttributeValueMemberS{Value: "table"},
		},
	})
	if err != nil || out.Item["version"] == nil {
		t.Errorf("install_status of activity_exec: %v %v", out, err)
	}
}

// TestInstallAddsMissingIndex checks the upgrade path: a table from an
// older install gains the index it lacks, and its data stays.
func TestInstallAddsMissingIndex(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	prefix := dynamotest.Prefix(t)
	ctx := context.Background()
	in := dynamodb.CreateTableInputs(prefix)[5] // activity_exec_dependency
	if aws.ToString(in.TableName) != prefix+"activity_exec_dependency" {
		t.Fatalf("unexpected table order: %s", aws.ToString(in.TableName))
	}
	in.GlobalSecondaryIndexes = in.GlobalSecondaryIndexes[:1]
	in.AttributeDefinitions = in.AttributeDefinitions[:3]
	if _, err := client.CreateTable(ctx, in); err != nil {
		t.Fatal(err)
	}
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix})
	did, err := st.Install(ctx, false)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if count(did, "add index dependent-index") != 1 || count(did, "create") != 6 {
		t.Errorf("install did %v, want 6 creates and the missing index", did)
	}
}

func TestInstallRefusesForeignKeySchema(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	prefix := dynamotest.Prefix(t)
	ctx := context.Background()
	if _, err := client.CreateTable(ctx, &awsdynamodb.CreateTableInput{
		TableName:            aws.String(prefix + "workflow_lambda"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		t.Fatal(err)
	}
	_, err := dynamodb.New(client, dynamodb.Options{Prefix: prefix}).Install(ctx, false)
	if err == nil || !strings.Contains(err.Error(), "workflow_lambda") || !strings.Contains(err.Error(), "--prefix") {
		t.Errorf("install over a foreign table: got %v, want an error naming the table and what to do", err)
	}
}

func count(actions []state.InstallAction, action string) int {
	n := 0
	for _, a := range actions {
		if a.Action == action {
			n++
		}
	}
	return n
}

func describeKeys(ks []types.KeySchemaElement) string {
	var parts []string
	for _, k := range ks {
		parts = append(parts, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return strings.Join(parts, ", ")
}
