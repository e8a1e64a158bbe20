package dynamodb_test

import (
	"context"
	"errors"
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

// TestHeartbeatCostsOneWriteUnit checks the heartbeat's budget: a heartbeat
// touches no index and costs exactly one write unit, even on the largest
// item a running activity can have: names of the longest length, an ECS task
// ARN, a long host name, a reason.
func TestHeartbeatCostsOneWriteUnit(t *testing.T) {
	t.Parallel()
	var log capacityLog
	st := dynamotest.NewStore(t, dynamodb.Options{Capacity: log.record})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	long := func(c string) string { return strings.Repeat(c, state.MaxNameLength) }
	wfName, actName, upName := long("w"), long("a"), long("u")
	execID := state.NewWorkflowExecID(wfName)
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(execID, actName), WorkflowExecID: execID}
	up := state.ActivityExecIDFor(execID, upName)
	now := time.Now()
	if err := st.CreateWorkflow(ctx, &state.NewWorkflow{
		Exec: state.WorkflowExec{WorkflowExecID: execID, WorkflowName: wfName, State: state.WorkflowRequested, StartTime: now},
		Activities: []state.ActivityExec{
			{ActivityKey: k, WorkflowName: wfName, ActivityName: actName, State: state.Requested, StateTime: now, PendingDependencies: []string{up}},
			{ActivityKey: state.ActivityKey{ActivityExecID: up, WorkflowExecID: execID}, WorkflowName: wfName, ActivityName: upName, State: state.Requested, StateTime: now},
		},
		Dependencies: []state.Dependency{{ID: state.DependencyID(k.ActivityExecID, 0), ActivityExecID: k.ActivityExecID, WorkflowExecID: execID, DependentActivityExecID: up}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.ResolveDependency(ctx, k, up); err != nil {
		t.Fatal(err)
	}
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Ready, Reason: "every activity it waits on completed"},
		{From: []state.ActivityState{state.Ready}, To: state.Queued, LaunchedAs: "arn:aws:ecs:eu-west-1:123456789012:task/whimbrel-production-cluster/0123456789abcdef0123456789abcdef"},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{
			Owner: "3f1d5c1e-8a59-4c7c-9d1e-3a3b9f0c2d11", Host: "ip-10-0-12-34.eu-west-1.compute.internal", PID: 4194304,
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
	// A state change does touch the state index: the test can see indexes.
	if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: state.Completed, Owner: "3f1d5c1e-8a59-4c7c-9d1e-3a3b9f0c2d11"}); err != nil {
		t.Fatal(err)
	}
	if c := log.take(); len(c) != 1 || c[0].Indexes["state-shard-index"] == 0 {
		t.Errorf("a state change consumed %+v; want some on state-shard-index", c)
	}
}

// hookedAPI calls after once, when the creator reads the workflow again
// after its first batch of items landed (before the read); the error it
// returns is the call's answer.
type hookedAPI struct {
	dynamodb.API
	once  sync.Once
	after func() error
}

func (m *hookedAPI) GetItem(ctx context.Context, in *awsdynamodb.GetItemInput, opts ...func(*awsdynamodb.Options)) (*awsdynamodb.GetItemOutput, error) {
	var err error
	if strings.HasSuffix(aws.ToString(in.TableName), dynamodb.TableWorkflowExec) {
		m.once.Do(func() { err = m.after() })
	}
	if err != nil {
		return nil, err
	}
	return m.API.GetItem(ctx, in, opts...)
}

func wideWorkflow(t *testing.T, name string, n int) *state.NewWorkflow {
	d := storetest.DAG{"root": nil}
	for i := 0; i < n; i++ {
		d[fmt.Sprintf("step-%03d", i)] = []string{"root"}
	}
	return storetest.NewWorkflow(t, name, d)
}

// TestCreateResumesAfterACrash: a creator dies after its first batch;
// the same call repeated writes the rest.
func TestCreateResumesAfterACrash(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := wideWorkflow(t, "crash", 120) // 121 activities and 120 dependency items: 3 batches
	crashing := dynamodb.New(&hookedAPI{API: dynamotest.Client(t), after: func() error {
		return errors.New("connection reset: the creator died")
	}}, dynamodb.Options{Prefix: st.Prefix()})
	if err := crashing.CreateWorkflow(ctx, w); err == nil {
		t.Fatal("the crash was not reported")
	}
	if acts, err := st.Activities(ctx, w.Exec.WorkflowExecID); err != nil || len(acts) != 98 {
		t.Fatalf("after the crash: %d activities (%v), want the first batch's 98", len(acts), err)
	}
	if err := st.CreateWorkflow(ctx, w); err != nil {
		t.Fatalf("repeat: %v", err)
	}
	acts, err := st.Activities(ctx, w.Exec.WorkflowExecID)
	if err != nil || len(acts) != 121 {
		t.Fatalf("after the repeat: %d activities (%v), want 121", len(acts), err)
	}
	deps, err := st.Dependents(ctx, storetest.Key(w, "root").ActivityExecID)
	if err != nil || len(deps) != 120 {
		t.Errorf("root has %d dependents (%v), want 120", len(deps), err)
	}
}

// TestCreateStopsWhenTheWorkflowMovesOn: a workflow that leaves REQUESTED
// between two batches gets no more items.
func TestCreateStopsWhenTheWorkflowMovesOn(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := wideWorkflow(t, "moved", 149) // 150 activities
	api := &hookedAPI{API: dynamotest.Client(t), after: func() error {
		_, err := st.UpdateWorkflow(ctx, w.Exec.WorkflowExecID, state.WorkflowChange{
			From: []state.WorkflowState{state.WorkflowRequested}, To: state.WorkflowFailed, Reason: "gave up"})
		return err
	}}
	creator := dynamodb.New(api, dynamodb.Options{Prefix: st.Prefix(), CallTimeout: dynamotest.CallTimeout})
	err := creator.CreateWorkflow(ctx, w)
	if !errors.Is(err, state.ErrExists) || !strings.Contains(err.Error(), "FAILED") {
		t.Fatalf("got %v, want ErrExists naming the FAILED workflow", err)
	}
	acts, err := st.Activities(ctx, w.Exec.WorkflowExecID)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 98 { // the first batch: 98 activities, after the request and workflow
		t.Errorf("%d activities written, want only the first batch's 98", len(acts))
	}
}

func TestInstall(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	prefix := dynamotest.Prefix(t)
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A dry run says what it would do and creates nothing.
	plan, err := st.Install(ctx, true)
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if n := count(plan, "create"); n != 11 {
		t.Errorf("dry run plans %d creates, want 11: %v", n, plan)
	}
	if _, err := client.DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(prefix + "workflow_exec")}); err == nil {
		t.Fatal("dry run created a table")
	}

	did, err := st.Install(ctx, false)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if count(did, "create") != 11 || count(did, "record version 4") != 11 {
		t.Errorf("install did %v, want 11 creates and 10 versions recorded", did)
	}

	// The key schemas are the contract's (docs/contract.md#tables).
	want := map[string]string{
		"install_status":           "object_id HASH, object_type RANGE",
		"workflow_request":         "workflow_request_id HASH, workflow_name RANGE",
		"activity_event":           "activity_event_id HASH, activity_exec_id RANGE",
		"workflow_exec":            "workflow_exec_id HASH, workflow_name RANGE",
		"activity_exec":            "activity_exec_id HASH, workflow_exec_id RANGE",
		"activity_exec_dependency": "activity_exec_dependency HASH, activity_exec_id RANGE",
		"workflow_lambda":          "workflow_name HASH",
		"stream_position":          "poller HASH, shard RANGE",
		"notification":             "workflow_exec_id HASH, notification_id RANGE",
	}
	wantIndexes := map[string]string{
		"activity_event":           "activity-index(activity_exec_id HASH, when_epoch RANGE)",
		"workflow_exec":            "name-shard-index(name_shard HASH, start_time_epoch RANGE) state-shard-index(state_shard HASH, start_time_epoch RANGE)",
		"activity_exec":            "state-shard-index(state_shard HASH, state_time_epoch RANGE) workflow-index(workflow_exec_id HASH, activity_exec_id RANGE)",
		"activity_exec_dependency": "dependent-index(dependent_activity_exec_id HASH) workflow-index(workflow_exec_id HASH)",
		"notification":             "due-index(due_shard HASH, due_epoch RANGE)",
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
		// The Simple Lambda API's processors read new images of requests
		// and events.
		sp := out.Table.StreamSpecification
		streamed := sp != nil && aws.ToBool(sp.StreamEnabled) && sp.StreamViewType == types.StreamViewTypeNewImage
		if want := base == "workflow_request" || base == "activity_event"; streamed != want || want && aws.ToString(out.Table.LatestStreamArn) == "" {
			t.Errorf("%s stream: %+v (ARN %q), want one of new images: %v", base, sp, aws.ToString(out.Table.LatestStreamArn), want)
		}
	}

	// TTL by expires_at on the tables of executions, on the schedules'
	// (their token items) and on the notifications'.
	if count(did, "enable TTL on expires_at") != 8 {
		t.Errorf("install enabled TTL %d times, want 8: %v", count(did, "enable TTL on expires_at"), did)
	}
	for _, base := range []string{"workflow_exec", "activity_exec", "activity_exec_dependency", "workflow_request", "activity_event", "stream_position", "schedule", "notification"} {
		ttl, err := client.DescribeTimeToLive(ctx, &awsdynamodb.DescribeTimeToLiveInput{TableName: aws.String(prefix + base)})
		if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled ||
			aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "expires_at" {
			t.Errorf("TTL of %s: %+v %v", base, ttl, err)
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
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix, TableWait: 10 * time.Second, CallTimeout: dynamotest.CallTimeout})
	did, err := st.Install(ctx, false)
	if count(did, "add index dependent-index") != 1 {
		t.Fatalf("install did %v (%v), want the missing index added", did, err)
	}
	out, derr := client.DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: in.TableName})
	if derr != nil || len(out.Table.GlobalSecondaryIndexes) != 2 {
		t.Fatalf("after install: %d indexes %v (install: %v), want both indexes", len(out.Table.GlobalSecondaryIndexes), derr, err)
	}
	if err != nil {
		// DynamoDB Local, while other indexes are built at the same time,
		// can leave an index it adds CREATING for good (real DynamoDB
		// finishes it), and the wait gives up. The index was added; that is
		// what this test checks. TestInstall checks the waits.
		if !strings.Contains(err.Error(), "gave up") {
			t.Fatalf("install: %v", err)
		}
		t.Logf("DynamoDB Local left the added index building: %v", err)
		return
	}
	// Every table but the one that was there.
	if want := len(dynamodb.CreateTableInputs("p_")) - 1; count(did, "create") != want {
		t.Errorf("install did %v, want %d creates and the missing index", did, want)
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
	_, err := dynamodb.New(client, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}).Install(ctx, false)
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

// TestInstallUpgradesForTheSimpleAPI: tables installed before the Simple
// Lambda API gain their streams. (Adding the events' index is the path
// TestInstallAddsMissingIndex checks.)
func TestInstallUpgradesForTheSimpleAPI(t *testing.T) {
	t.Parallel()
	client := dynamotest.Client(t)
	prefix := dynamotest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, in := range dynamodb.CreateTableInputs(prefix) {
		base := strings.TrimPrefix(aws.ToString(in.TableName), prefix)
		if base != "workflow_request" && base != "activity_event" {
			continue
		}
		in.StreamSpecification = nil
		if _, err := client.CreateTable(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	st := dynamodb.New(client, dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	did, err := st.Install(ctx, false)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if count(did, "enable stream (new images)") != 2 {
		t.Errorf("install did %v, want 2 streams enabled", did)
	}
	for _, base := range []string{"workflow_request", "activity_event"} {
		out, err := client.DescribeTable(ctx, &awsdynamodb.DescribeTableInput{TableName: aws.String(prefix + base)})
		if err != nil {
			t.Fatal(err)
		}
		if sp := out.Table.StreamSpecification; sp == nil || !aws.ToBool(sp.StreamEnabled) || sp.StreamViewType != types.StreamViewTypeNewImage {
			t.Errorf("%s stream after install: %+v", base, sp)
		}
	}
	if again, err := st.Install(ctx, false); err != nil || len(again) != 0 {
		t.Errorf("second install: %v, %v; want nothing done", again, err)
	}
}

// TestSeedStalenessScanAfterClaim runs the base contract's staleness check
// as a client written from the contract alone would, as a raw Scan ("state =
// RUNNING and heartbeat_time_epoch < now - timeout"), right after the
// claim: the claim wrote the first heartbeat, so it finds nothing.
func TestSeedStalenessScanAfterClaim(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := storetest.NewWorkflow(t, "stale", storetest.DAG{"a": nil})
	storetest.Create(t, st, w)
	k := storetest.Key(w, "a")
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued},
		{From: []state.ActivityState{state.Queued}, To: state.Running, Claim: &state.Claim{Owner: "o", HeartbeatEnabled: true,
			HeartbeatInterval: time.Second, HeartbeatTimeout: 2 * time.Second}},
	} {
		if _, err := st.UpdateActivity(ctx, k, c); err != nil {
			t.Fatal(err)
		}
	}
	stale := func(now time.Time) int {
		out, err := dynamotest.Client(t).Scan(ctx, &awsdynamodb.ScanInput{
			TableName:                 aws.String(st.Prefix() + dynamodb.TableActivityExec),
			ConsistentRead:            aws.Bool(true),
			FilterExpression:          aws.String("#s = :running AND heartbeat_time_epoch < :cutoff"),
			ExpressionAttributeNames:  map[string]string{"#s": "state"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":running": &types.AttributeValueMemberS{Value: "RUNNING"}, ":cutoff": &types.AttributeValueMemberN{Value: state.FormatEpoch(now.Add(-2 * time.Second))}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}
	if n := stale(time.Now()); n != 0 {
		t.Errorf("right after the claim the base contract's check finds %d stale, want 0", n)
	}
	if n := stale(time.Now().Add(3 * time.Second)); n != 1 {
		t.Errorf("3 s later with no beat the base contract's check finds %d stale, want 1 (else it cannot fail)", n)
	}
}
