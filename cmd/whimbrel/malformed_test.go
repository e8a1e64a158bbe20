package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	_ "modernc.org/sqlite" // the raw writer of the sqlite case

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// rawItem is an item as a foreign client writes it: string (S), int and
// float64 (N), bool (BOOL), []any (L), map[string]any (M).
type rawItem map[string]any

// rawStore writes raw items, bypassing Whimbrel's encoding.
type rawStore interface {
	put(t *testing.T, base string, it rawItem)
}

type rawDynamo struct{ prefix string }

func (r rawDynamo) put(t *testing.T, base string, it rawItem) {
	t.Helper()
	m := map[string]types.AttributeValue{}
	for k, v := range it {
		m[k] = avOf(t, v)
	}
	if _, err := dynamotest.Client(t).PutItem(context.Background(), &awsdynamodb.PutItemInput{
		TableName: aws.String(r.prefix + base), Item: m}); err != nil {
		t.Fatalf("raw PutItem: %v", err)
	}
}

func avOf(t *testing.T, v any) types.AttributeValue {
	switch v := v.(type) {
	case string:
		return &types.AttributeValueMemberS{Value: v}
	case int:
		return &types.AttributeValueMemberN{Value: strconv.Itoa(v)}
	case float64:
		return &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'f', -1, 64)}
	case bool:
		return &types.AttributeValueMemberBOOL{Value: v}
	case []any:
		l := &types.AttributeValueMemberL{}
		for _, e := range v {
			l.Value = append(l.Value, avOf(t, e))
		}
		return l
	case map[string]any:
		m := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
		for k, e := range v {
			m.Value[k] = avOf(t, e)
		}
		return m
	}
	t.Fatalf("avOf: %T", v)
	return nil
}

// rawSQLite inserts rows directly: the key and index columns, and the item
// as DynamoDB JSON (or, with rawJSON, any text at all).
type rawSQLite struct{ path, prefix string }

const rawJSON = "(raw JSON)"

func (r rawSQLite) put(t *testing.T, base string, it rawItem) {
	t.Helper()
	keys := map[string][]string{
		"activity_exec": {"activity_exec_id", "workflow_exec_id", "state", "state_time_epoch"},
		"workflow_exec": {"workflow_exec_id", "workflow_name", "state", "start_time_epoch"},
		"schedule":      {"schedule_name", "entry", "due_shard", "next_fire_epoch"},
	}[base]
	var text string
	if raw, ok := it[rawJSON].(string); ok {
		text = raw
	} else {
		m := map[string]any{}
		for k, v := range it {
			m[k] = jsonOf(v)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		text = string(b)
	}
	args := []any{}
	for _, k := range keys {
		switch v := it[k].(type) {
		case string, int, float64:
			args = append(args, v)
		default:
			args = append(args, nil)
		}
	}
	db, err := sql.Open("sqlite", "file:"+r.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := fmt.Sprintf(`INSERT INTO "%s%s" ("%s", item) VALUES (?, ?, ?, ?, ?)`, r.prefix, base, strings.Join(keys, `", "`))
	if _, err := db.Exec(q, append(args, text)...); err != nil {
		t.Fatalf("raw insert: %v", err)
	}
}

func jsonOf(v any) any {
	switch v := v.(type) {
	case string:
		return map[string]any{"S": v}
	case int:
		return map[string]any{"N": strconv.Itoa(v)}
	case float64:
		return map[string]any{"N": strconv.FormatFloat(v, 'f', -1, 64)}
	case bool:
		return map[string]any{"BOOL": v}
	case []any:
		l := []any{}
		for _, e := range v {
			l = append(l, jsonOf(e))
		}
		return map[string]any{"L": l}
	case map[string]any:
		m := map[string]any{}
		for k, e := range v {
			m[k] = jsonOf(e)
		}
		return map[string]any{"M": m}
	}
	return map[string]any{"NULL": true}
}

// TestMalformedItemsNeverStopTheFleet seeds, among valid workflows, items
// as other clients may write them wrong (epoch in milliseconds, a state not
// among the ten, a time list of the wrong shape, attributes of the wrong
// type, a missing key attribute, hostile IDs, a workflow item with a
// mistyped attribute, and on SQLite a row that is not JSON at all), on both
// stores. Then real launchers and monitors run: the valid activities
// launch, complete, time out and settle as usual; list, status, stats and
// cancel work; and each daemon reports each bad item once, by its key.
func TestMalformedItemsNeverStopTheFleet(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "state.db")
		st, err := sqlite.Open(path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		testMalformed(t, st, rawSQLite{path: path, prefix: "whimbrel_"}, []string{"WHIMBREL_STORE=sqlite:" + path}, true)
	})
	t.Run("dynamodb", func(t *testing.T) {
		t.Parallel()
		prefix := dynamotest.Prefix(t)
		testMalformed(t, dynamodb.New(dynamotest.Client(t), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), rawDynamo{prefix: prefix},
			dynamotest.Env(t, prefix), false)
	})
}

func testMalformed(t *testing.T, st state.Store, raw rawStore, env []string, sqliteOnly bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}

	// A valid workflow the launcher runs to COMPLETED.
	good := writeFile(t, "good.yaml", "name: good\nactivities:\n  one: {command: [\"true\"]}\n  two: {command: [\"true\"], depends_on: [one]}\n")
	// --detach: on the embedded store start would run it here; this test's
	// own launcher and monitor must serve it among the bad items.
	out, errOut, code := whimbrel(t, env, "start", "--detach", good)
	if code != 0 {
		t.Fatalf("start: %s", errOut)
	}
	goodID := strings.TrimSpace(out)

	// A valid activity whose wrapper died: the monitor times it out and
	// the workflow settles FAILED.
	late := storetest.NewWorkflow(t, "late", storetest.DAG{"stuck": nil})
	storetest.Create(t, st, late)
	past := time.Now().Add(-10 * time.Minute)
	for _, c := range []state.ActivityChange{
		{From: []state.ActivityState{state.Requested}, To: state.Queued, At: past},
		{From: []state.ActivityState{state.Queued}, To: state.Running, At: past,
			Claim: storetest.Claim("gone")},
	} {
		if _, err := st.UpdateActivity(ctx, storetest.Key(late, "stuck"), c); err != nil {
			t.Fatal(err)
		}
	}

	// A valid workflow whose other activities other clients wrote wrong.
	mixed := writeFile(t, "mixed.yaml", "name: mixed\nactivities:\n  fine: {command: [\"true\"]}\n")
	out, errOut, code = whimbrel(t, env, "start", "--detach", mixed)
	if code != 0 {
		t.Fatalf("start: %s", errOut)
	}
	mixedID := strings.TrimSpace(out)
	now := float64(time.Now().UnixMilli()) / 1000
	nowList := []any{2026, 11, 23, 10, 0, 0}
	type bad struct {
		name, attr string
		item       rawItem
	}
	act := func(name string, attrs rawItem) rawItem {
		it := rawItem{"activity_exec_id": name + "::" + uuid.NewString(), "workflow_exec_id": mixedID, "workflow_name": "mixed",
			"activity_name": name, "state_time": nowList, "state_time_epoch": now}
		for k, v := range attrs {
			it[k] = v
		}
		return it
	}
	bads := []bad{
		{"epoch in milliseconds", "state_time_epoch", act("millis", rawItem{"state": "READY", "state_time_epoch": now * 1000})},
		{"unknown state", "state", act("sleepy", rawItem{"state": "SLEEPING"})},
		{"time list of the wrong shape", "start_time", act("shape", rawItem{"state": "RUNNING", "heartbeat_enabled": true,
			"start_time": []any{2026, 11}})},
		{"attempt is a string", "attempt", act("typed", rawItem{"state": "QUEUED", "attempt": "one"})},
		{"reason is a map", "reason", act("mapped", rawItem{"state": "QUEUED", "reason": map[string]any{"why": "x"}})},
		{"missing state (an index key)", "state", act("stateless", nil)},
		{"hostile ID", "activity_exec_id", act("hostile", rawItem{"state": "READY",
			"activity_exec_id": "evil\x1b[2J\x1b]0;pwned\x07::" + uuid.NewString()})},
	}
	if sqliteOnly {
		bads = append(bads, bad{"not JSON", "(the whole item)", rawItem{"activity_exec_id": "junk::" + uuid.NewString(),
			"workflow_exec_id": mixedID, "state": "READY", "state_time_epoch": now, rawJSON: "{not json"}})
	}
	for _, b := range bads {
		raw.put(t, "activity_exec", b.item)
	}
	// A workflow item a foreign client wrote wrong, among the running ones
	// (raw, as a Full Logic API client writes it: no shard attributes;
	// the monitor's adoption scan finds it).
	brokenID := "broken::" + uuid.NewString()
	raw.put(t, "workflow_exec", rawItem{"workflow_exec_id": brokenID, "workflow_name": "broken", "state": "RUNNING",
		"start_time_epoch": now, "start_time": nowList, "reason": 42})

	// Real daemons, logging to files.
	daemon := func(name string, args ...string) (logFile string, stop func()) {
		logFile = filepath.Join(t.TempDir(), name+".log")
		f, err := os.Create(logFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(filepath.Dir(binary), name), args...)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			f.Close()
		}
		t.Cleanup(stop)
		return logFile, stop
	}
	// The monitor first: its adoption scan stamps the foreign READY items
	// into the state index, so the launcher's very first read (its start
	// check) meets them, every run.
	monitorLog, stopMonitor := daemon("whimbrel-monitor", "--interval", "300ms", "--skew", "0s")
	hostileID := bads[6].item["activity_exec_id"].(string)
	waitUntil(t, "the monitor meets the foreign items", func() bool {
		b, _ := os.ReadFile(monitorLog)
		return strings.Contains(string(b), hostileID[strings.LastIndex(hostileID, "::"):])
	})
	launcherLog, stopLauncher := daemon("whimbrel-launcher", "--interval", "200ms", "--log-dir", t.TempDir())

	settled := func(id string) state.WorkflowState {
		wf, err := st.GetWorkflow(ctx, id)
		if err != nil {
			t.Fatalf("read workflow %s: %v", id, err)
		}
		return wf.State
	}
	settleBy := time.Now().Add(90 * time.Second)
	for settled(goodID) != state.WorkflowCompleted || settled(late.Exec.WorkflowExecID) != state.WorkflowFailed {
		if time.Now().After(settleBy) {
			// Say what was left, and what the daemons said, so that a
			// failure on a loaded CI run can be understood from its log.
			for _, id := range []string{goodID, late.Exec.WorkflowExecID} {
				acts, err := st.Activities(ctx, id)
				t.Logf("workflow %s: %s; activities %v", id, settled(id), err)
				for _, a := range acts {
					t.Logf("  %s %s owner=%q reason=%q", a.ActivityName, a.State, a.Owner, a.Reason)
				}
			}
			stopLauncher()
			stopMonitor()
			for _, file := range []string{launcherLog, monitorLog} {
				b, _ := os.ReadFile(file)
				t.Logf("%s:\n%s", filepath.Base(file), b)
			}
			t.Fatal("the valid workflows did not settle within 90 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a, err := st.GetActivity(ctx, storetest.Key(late, "stuck")); err != nil || a.State != state.TimedOut {
		t.Errorf("the stuck activity: %+v, %v; want TIMED_OUT", a, err)
	}
	fine := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(mixedID, "fine"), WorkflowExecID: mixedID}
	waitUntil(t, "the valid activity among the malformed ones completes", func() bool {
		a, err := st.GetActivity(ctx, fine)
		return err == nil && a.State == state.Completed
	})
	time.Sleep(2 * time.Second) // several more passes and sweeps over the same bad items
	stopLauncher()
	stopMonitor()
	if s := settled(mixedID); s != state.WorkflowRunning {
		t.Errorf("the workflow with undecodable activities is %s; it cannot be judged, so it must stay RUNNING", s)
	}

	// Each daemon reported each bad item it met once, by its key.
	logs := map[string]string{}
	for name, file := range map[string]string{"launcher": launcherLog, "monitor": monitorLog} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		logs[name] = string(b)
	}
	reports := func(log, id string) int {
		marker := id[strings.LastIndex(id, "::"):] // the printable part of a hostile ID
		n := 0
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "cannot be decoded") && strings.Contains(line, marker) {
				n++
			}
		}
		return n
	}
	for _, b := range bads {
		id := b.item["activity_exec_id"].(string)
		if n := reports(logs["monitor"], id); n != 1 {
			t.Errorf("%s: the monitor reported it %d times, want once\n%s", b.name, n, logs["monitor"])
		}
		if strings.Contains(logs["monitor"], "\x1b") || strings.Contains(logs["launcher"], "\x1b") {
			t.Errorf("a hostile ID reached a log raw")
		}
	}
	for _, b := range []bad{bads[0], bads[6]} { // in the READY index
		if n := reports(logs["launcher"], b.item["activity_exec_id"].(string)); n != 1 {
			t.Errorf("%s: the launcher reported it %d times, want once\n%s", b.name, n, logs["launcher"])
		}
	}
	if n := reports(logs["monitor"], brokenID); n != 1 {
		t.Errorf("the broken workflow item: the monitor reported it %d times, want once", n)
	}

	// list, status, stats and cancel work, and say what they skipped.
	out, errOut, code = whimbrel(t, env, "list", "--since", "0")
	if code != 0 || !strings.Contains(out, goodID) || !strings.Contains(out, mixedID) || !strings.Contains(out, late.Exec.WorkflowExecID) ||
		strings.Contains(out, brokenID) || !strings.Contains(errOut, brokenID) {
		t.Errorf("list: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = whimbrel(t, env, "status", mixedID)
	if code != 0 || !strings.Contains(out, "fine") || strings.Contains(out, "\x1b") {
		t.Errorf("status: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, b := range bads {
		id := b.item["activity_exec_id"].(string)
		if !strings.Contains(out, strconv.Quote(id)) && !strings.Contains(out, "item "+id+" cannot be decoded: attribute "+b.attr) {
			t.Errorf("status does not show %s (%s) as undecodable with attribute %s:\n%s", id, b.name, b.attr, out)
		}
	}
	if !strings.Contains(out, "undecodable (SLEEPING)") {
		t.Errorf("status does not show the raw state of the unknown one:\n%s", out)
	}
	jsonOut, _, code := whimbrel(t, env, "status", "--json", mixedID)
	var s struct {
		Activities []struct {
			ID          string `json:"activity_exec_id"`
			State       string `json:"state"`
			Undecodable string `json:"undecodable"`
		} `json:"activities"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &s); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, jsonOut)
	}
	undecodable := 0
	for _, a := range s.Activities {
		if a.Undecodable != "" {
			undecodable++
		}
	}
	if undecodable != len(bads) {
		t.Errorf("status --json shows %d undecodable activities, want %d:\n%s", undecodable, len(bads), jsonOut)
	}
	out, errOut, code = whimbrel(t, env, "stats", "--since", "0")
	if code != 0 || !strings.Contains(out, "good") || !strings.Contains(out, "late") {
		t.Errorf("stats: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = whimbrel(t, env, "cancel", mixedID)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d activities could not be decoded", len(bads))) {
		t.Errorf("cancel: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if s := settled(mixedID); s != state.WorkflowCancelled {
		t.Errorf("after cancel the workflow is %s, want CANCELLED", s)
	}
}
