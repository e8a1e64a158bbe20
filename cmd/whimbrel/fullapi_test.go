package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
)

// rawState reads an item's state with a plain GetItem: a read through the
// Store would put the item under its shards itself, and serve it without
// the monitor's adoption this test is about.
func rawState(t *testing.T, table string, key rawItem) string {
	t.Helper()
	k := map[string]types.AttributeValue{}
	for a, v := range key {
		k[a] = avOf(t, v)
	}
	out, err := dynamotest.Client(t).GetItem(context.Background(), &awsdynamodb.GetItemInput{
		TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil || out.Item == nil {
		t.Fatalf("read %s %v: %v", table, key, err)
	}
	s, _ := out.Item["state"].(*types.AttributeValueMemberS)
	if s == nil {
		t.Fatalf("%s %v has no state", table, key)
	}
	return s.Value
}

// TestFullLogicAPIClientIsServed: a client of the Full Logic API writes a
// RUNNING workflow with a READY activity itself, raw, with the base
// contract's attributes only (whole-second times, none of the optional ones,
// no shard attributes), and the definition Whimbrel's launcher runs it
// from. A sweep that does not adopt leaves it alone; a running monitor,
// which adopts, and a local launcher run it to COMPLETED.
func TestFullLogicAPIClientIsServed(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	env := dynamotest.Env(t, prefix)
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	d, err := definition.Parse("seeded.yaml", []byte("name: seeded\nactivities:\n  only: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	wfID, actID := "seeded::"+uuid.NewString(), "only::"+uuid.NewString()
	raw := rawDynamo{prefix: prefix}
	raw.put(t, "workflow_exec", rawItem{"workflow_exec_id": wfID, "workflow_name": "seeded", "state": "RUNNING",
		"start_time_epoch": int(now.Unix()),
		"start_time":       []any{now.Year(), int(now.Month()), now.Day(), now.Hour(), now.Minute(), now.Second()},
		"definition":       d.JSON()})
	raw.put(t, "activity_exec", rawItem{"activity_exec_id": actID, "workflow_exec_id": wfID, "workflow_name": "seeded",
		"activity_name": "only", "state": "READY", "state_time_epoch": int(now.Unix()),
		"start_time_epoch": -1, "heartbeat_time_epoch": -1})
	wfKey := rawItem{"workflow_exec_id": wfID, "workflow_name": "seeded"}
	actKey := rawItem{"activity_exec_id": actID, "workflow_exec_id": wfID}

	daemon(t, env, "whimbrel-launcher", "--interval", "200ms", "--log-dir", t.TempDir())
	once := exec.Command(filepath.Join(filepath.Dir(binary), "whimbrel-monitor"), "--once", "--adopt-pages", "0")
	once.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	if out, err := once.CombinedOutput(); err != nil {
		t.Fatalf("whimbrel-monitor --once --adopt-pages 0: %v\n%s", err, out)
	}
	time.Sleep(time.Second) // five launcher passes
	if s := rawState(t, prefix+"activity_exec", actKey); s != "READY" {
		t.Fatalf("without adoption the raw activity is %s; want it still READY (nothing lists it): the test proves nothing", s)
	}

	daemon(t, env, "whimbrel-monitor", "--interval", "300ms", "--skew", "0s")
	waitUntil(t, "the raw workflow completes", func() bool {
		return rawState(t, prefix+"workflow_exec", wfKey) == "COMPLETED"
	})
	if s := rawState(t, prefix+"activity_exec", actKey); s != "COMPLETED" {
		t.Errorf("the raw activity is %s, want COMPLETED", s)
	}
}
