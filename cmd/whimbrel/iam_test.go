package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
)

// recorder is a proxy in front of DynamoDB (Local) that notes each call a
// binary makes, as the IAM action and resource AWS authorises it against.
type recorder struct {
	prefix string
	mu     sync.Mutex
	calls  map[string]bool // "dynamodb:GetItem table/whimbrel_activity_exec"
}

func newRecorder(t *testing.T, prefix string) (*recorder, string) {
	t.Helper()
	target, err := url.Parse(dynamotest.Endpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{prefix: prefix, calls: map[string]bool{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		r.note(req.Header.Get("X-Amz-Target"), body)
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

var streamARN = regexp.MustCompile(`table/([^/"]+)/stream/`)

// note records one request: its action, and each table, index or stream
// it names (a transaction's items each need their own action).
func (r *recorder) note(target string, body []byte) {
	_, op, ok := strings.Cut(target, ".")
	if !ok {
		return
	}
	var in struct {
		TableName     string
		IndexName     string
		StreamArn     string
		ShardIterator string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	_ = json.Unmarshal(body, &in)
	add := func(action, resource string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.calls["dynamodb:"+action+" "+resource] = true
	}
	table := func(name string) string { return "table/whimbrel_" + strings.TrimPrefix(name, r.prefix) }
	switch {
	case strings.HasPrefix(target, "DynamoDBStreams"):
		arn := in.StreamArn
		if arn == "" {
			arn = in.ShardIterator // DynamoDB Local's iterators carry the stream's ARN
		}
		if m := streamARN.FindStringSubmatch(arn); m != nil {
			add(op, table(m[1])+"/stream/*")
		} else if in.TableName != "" {
			add(op, table(in.TableName)+"/stream/*")
		} else {
			add(op, "*")
		}
	case op == "TransactWriteItems":
		for _, it := range in.TransactItems {
			for kind, x := range it {
				action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}[kind]
				add(action, table(x.TableName))
			}
		}
	case op == "BatchGetItem":
		for name := range in.RequestItems {
			add(op, table(name))
		}
	case in.IndexName != "":
		add(op, table(in.TableName)+"/index/"+in.IndexName)
	case in.TableName != "":
		add(op, table(in.TableName))
	default:
		add(op, "*")
	}
}

func (r *recorder) needs() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps(r.calls)
}

func maps(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// grants reads what a policy in examples/iam allows on DynamoDB, as
// "action resource" pairs (the resource after the account: table/…).
func grants(t *testing.T, name string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "iam", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Statement []struct {
			Effect   string
			Action   []string
			Resource json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &policy); err != nil {
		t.Fatalf("%s: %v (Action must be a list)", name, err)
	}
	out := map[string]bool{}
	for _, s := range policy.Statement {
		if s.Effect != "Allow" {
			continue
		}
		var resources []string
		if err := json.Unmarshal(s.Resource, &resources); err != nil {
			var one string
			if err := json.Unmarshal(s.Resource, &one); err != nil {
				t.Fatalf("%s: Resource %s is neither a string nor a list", name, s.Resource)
			}
			resources = []string{one}
		}
		for _, a := range s.Action {
			if !strings.HasPrefix(a, "dynamodb:") {
				continue
			}
			for _, res := range resources {
				_, rest, ok := strings.Cut(res, ":table/")
				if !ok {
					t.Errorf("%s: %s on %q: name a table, an index or a stream", name, a, res)
					continue
				}
				out[a+" table/"+rest] = true
			}
		}
	}
	return out
}

// compare says what needed is not granted, and what granted is not needed.
func compare(granted, needed map[string]bool) (missing, extra []string) {
	for k := range needed {
		if !granted[k] {
			missing = append(missing, k)
		}
	}
	for k := range granted {
		if !needed[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

// settling is what advancing a workflow to its end calls: the last
// activity's dependents, the workflow's and its request's moves, and the
// expiry of every item under the definition's retention (the activities'
// Simple Lambda API events included). Whoever moves the last activity
// settles: a wrapper, the launcher (a failed launch), the monitor (a
// timeout, a repair), the operator (a cancellation) or the processor; which
// one varies from run to run.
var settling = []string{
	"dynamodb:GetItem table/whimbrel_workflow_exec",
	"dynamodb:UpdateItem table/whimbrel_workflow_exec",
	"dynamodb:UpdateItem table/whimbrel_workflow_request",
	"dynamodb:BatchGetItem table/whimbrel_activity_exec",
	"dynamodb:UpdateItem table/whimbrel_activity_exec",
	"dynamodb:UpdateItem table/whimbrel_activity_exec_dependency",
	"dynamodb:UpdateItem table/whimbrel_activity_event",
	"dynamodb:Query table/whimbrel_activity_exec/index/workflow-index",
	"dynamodb:Query table/whimbrel_activity_exec_dependency/index/workflow-index",
	"dynamodb:Query table/whimbrel_activity_event/index/activity-index",
	// Releasing the pool slots of an activity that ended.
	"dynamodb:Query table/whimbrel_pool",
	"dynamodb:PutItem table/whimbrel_pool",
}

// firing is what firing the due schedules (schedule.Tick) calls: the due
// index and each schedule's cursor; an --after schedule's count of its
// upstream's completions; a catch-up skip's look for the run of the first
// fire time it skips; and starting each run (its request, execution,
// activities and dependencies, the workflow read again between batches
// of a big definition). Every monitor sweep fires, so does
// whimbrel schedule tick (the operator) and whimbrel-lambda on its
// EventBridge event (under the processor's role); which of them fires a
// given time, and which paths it takes, varies from run to run.
var firing = []string{
	"dynamodb:Query table/whimbrel_schedule/index/due-index",
	"dynamodb:GetItem table/whimbrel_schedule",
	"dynamodb:PutItem table/whimbrel_schedule",
	"dynamodb:Query table/whimbrel_workflow_exec/index/name-shard-index",
	"dynamodb:GetItem table/whimbrel_workflow_request",
	"dynamodb:PutItem table/whimbrel_workflow_request",
	"dynamodb:PutItem table/whimbrel_workflow_exec",
	"dynamodb:GetItem table/whimbrel_workflow_exec",
	"dynamodb:PutItem table/whimbrel_activity_exec",
	"dynamodb:PutItem table/whimbrel_activity_exec_dependency",
}

// notifying is what recording an execution's ending or starting one
// calls when its definition asks for notifications (notify:, deadline:):
// the watch written at its start, the deliveries written at its end, the
// watch closed; every participant that starts or settles a workflow may.
var notifying = []string{
	"dynamodb:GetItem table/whimbrel_notification",
	"dynamodb:PutItem table/whimbrel_notification",
}

// mayCall lists what a binary calls on paths the scenario of
// TestIAMPoliciesByResource does not always reach; a policy must grant
// them, and may grant nothing else the binary was not seen to call.
var mayCall = map[string][]string{
	"whimbrel-run": slices.Concat(settling, notifying),
	// A wrapper of the Simple Lambda API writes events and reads; it
	// withdraws a claim no processor decided in time (an update of its
	// event), which the scenario's processor always decides, and reads
	// every activity of its workflow for a fan-in of many upstreams.
	"whimbrel-run-simple": {"dynamodb:UpdateItem table/whimbrel_activity_event",
		"dynamodb:BatchGetItem table/whimbrel_activity_exec", "dynamodb:Query table/whimbrel_activity_exec/index/workflow-index"},
	"whimbrel-launcher": slices.Concat(settling, notifying),
	// A monitor's deliverer reads the due notifications at every
	// interval, and delivers what notifying definitions wrote.
	"whimbrel-monitor": slices.Concat(settling, firing, notifying, []string{"dynamodb:Query table/whimbrel_notification/index/due-index"}),
	// The operator's install puts the items of tables installed before
	// the sharded indexes under their shards, reading them through the
	// legacy state indexes, which the scenario's tables lack.
	"whimbrel-operator": slices.Concat(settling, firing, notifying, []string{
		"dynamodb:Query table/whimbrel_notification", // whimbrel status lists the notifications
		"dynamodb:Query table/whimbrel_activity_exec/index/state-index",
		"dynamodb:Query table/whimbrel_workflow_exec/index/state-index",
	}),
	"whimbrel-processor": slices.Concat(settling, firing, notifying),
}

// daemon runs a binary beside whimbrel until the test ends.
func daemon(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(filepath.Dir(binary), name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s said:\n%s", name, out.String())
		}
	})
}

// withEndpoint is env with DynamoDB reached through endpoint.
func withEndpoint(env []string, endpoint string) []string {
	out := []string{"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint}
	for _, e := range env {
		if !strings.HasPrefix(e, "AWS_ENDPOINT_URL_DYNAMODB=") {
			out = append(out, e)
		}
	}
	return out
}

// TestIAMPoliciesByResource runs each binary's work through a recording
// proxy (the operator's commands, schedules included; a launcher, its
// wrappers and a monitor running workflows that complete, fail, time out
// and are cancelled, the monitor firing schedules; a processor applying the
// Simple Lambda API's requests and events, and firing schedules as
// whimbrel-lambda does on its EventBridge event), and
// checks each policy in examples/iam grants exactly the DynamoDB actions
// each binary called on exactly the tables, indexes and streams it
// touched: nothing missing, nothing extra.
func TestIAMPoliciesByResource(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	base := dynamotest.Env(t, prefix)
	roles := map[string]*recorder{}
	envs := map[string][]string{}
	for _, role := range []string{"whimbrel-operator", "whimbrel-launcher", "whimbrel-run", "whimbrel-run-simple", "whimbrel-monitor", "whimbrel-processor"} {
		r, ep := newRecorder(t, prefix)
		roles[role], envs[role] = r, withEndpoint(base, ep)
	}
	op := func(args ...string) string {
		t.Helper()
		out, errOut, code := whimbrelIn(t, t.TempDir(), envs["whimbrel-operator"], args...)
		if code != 0 {
			t.Fatalf("whimbrel %v: exit %d\n%s\n%s", args, code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	op("install")

	// The wrappers reach DynamoDB through their own proxy, one for each
	// API: the definitions hand them its endpoint.
	runEP := map[bool]string{false: strings.TrimPrefix(envs["whimbrel-run"][0], "AWS_ENDPOINT_URL_DYNAMODB="),
		true: strings.TrimPrefix(envs["whimbrel-run-simple"][0], "AWS_ENDPOINT_URL_DYNAMODB=")}
	dir := t.TempDir()
	fakeDocker := filepath.Join(dir, "docker")
	// A docker CLI whose containers never start whimbrel-run (the monitor
	// times them out), and which fails to start the image "fails" (the
	// launcher records the failure).
	script := "#!/bin/sh\nfor a; do [ \"$a\" = fails ] && { echo 'no such image' >&2; exit 1; }; done\necho 0123456789ab\n"
	if err := os.WriteFile(fakeDocker, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	def := func(name, body string) string {
		p := filepath.Join(dir, name+".yaml")
		text := fmt.Sprintf("name: %s\nretention: 30d\ndefaults:\n  heartbeat_interval: 1s\n  heartbeat_timeout: 10s\n  env: {AWS_ENDPOINT_URL_DYNAMODB: %q, WHIMBREL_API: %s}\nactivities:\n%s",
			name, runEP[strings.HasPrefix(name, "simple")], map[bool]string{true: "simple", false: "full"}[strings.HasPrefix(name, "simple")], body)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	op("pool", "set", "iam-pool", "--slots", "1")
	ok := def("iam-ok", "  a: {pool: iam-pool, command: [sh, -c, 'sleep 1.5']}\n  b: {command: ['true'], depends_on: [a]}\n")
	bad := def("iam-bad", "  a: {command: ['true']}\n  b: {command: [sh, -c, 'exit 3'], depends_on: [a]}\n")
	stuck := def("iam-stuck", "  a: {launch: {type: docker, image: never-starts}, queued_timeout: 2s}\n")
	nolaunch := def("iam-nolaunch", "  a: {launch: {type: docker, image: fails}}\n  b: {command: ['true'], depends_on: [a]}\n")
	// More activities and dependencies than one transaction holds: the
	// creator checks, chunk after chunk, that the workflow is still
	// REQUESTED. They run on ECS, which this launcher does not serve, so
	// they wait until cancelled.
	var big strings.Builder
	big.WriteString("  a0: {launch: {type: ecs, cluster: c, task_definition: 't:1', container: main, launch_type: FARGATE, subnets: [s], security_groups: [g]}}\n")
	for i := 1; i < 60; i++ {
		fmt.Fprintf(&big, "  a%d: {depends_on: [a0], launch: {type: ecs, cluster: c, task_definition: 't:1', container: main, launch_type: FARGATE, subnets: [s], security_groups: [g]}}\n", i)
	}
	bigOp := def("iam-big", big.String())
	bigSimple := def("simple-big", big.String())
	long := def("iam-long", "  a: {command: [sleep, '60']}\n  b: {command: ['true'], depends_on: [a]}\n")
	simple := def("simple-iam", "  a: {command: ['true']}\n  b: {command: [sh, -c, 'exit 4'], depends_on: [a]}\n")

	daemon(t, envs["whimbrel-launcher"], "whimbrel-launcher", "--types", "local,docker", "--interval", "200ms", "--log-dir", t.TempDir(), "--docker", fakeDocker)
	daemon(t, envs["whimbrel-monitor"], "whimbrel-monitor", "--interval", "500ms", "--skew", "0s")
	daemon(t, envs["whimbrel-processor"], "whimbrel-poller", "--poll-interval", "100ms", "--order-window", "1s")

	okID := op("start", ok)
	badID := op("start", bad)
	stuckID := op("start", stuck)
	nolaunchID := op("start", nolaunch)
	longID := op("start", long)
	op("register", simple)
	simpleID := op("request", "simple-iam")
	bigID := op("start", bigOp)
	op("register", bigSimple)
	bigSimpleID := op("request", "simple-big")
	for _, id := range []string{bigID, bigSimpleID} {
		waitUntil(t, "workflow "+id+" runs", func() bool {
			out, _, _ := whimbrelIn(t, t.TempDir(), base, "status", "--json", id)
			return strings.Contains(out, `"state": "RUNNING"`)
		})
		op("cancel", id)
	}

	settled := func(id string) bool {
		out, _, code := whimbrelIn(t, t.TempDir(), base, "status", "--json", id)
		var s struct {
			Workflow struct{ State string } `json:"workflow"`
		}
		return code == 0 && json.Unmarshal([]byte(out), &s) == nil && slices.Contains([]string{"COMPLETED", "FAILED", "CANCELLED"}, s.Workflow.State)
	}
	waitUntil(t, "the long activity runs", func() bool {
		out, _, _ := whimbrelIn(t, t.TempDir(), base, "status", "--json", longID)
		return strings.Contains(out, `"state": "RUNNING"`)
	})
	op("cancel", longID)
	for _, id := range []string{okID, badID, stuckID, nolaunchID, longID, simpleID, bigID, bigSimpleID} {
		waitUntil(t, "workflow "+id+" settles", func() bool { return settled(id) })
	}
	// Schedules: the operator sets, reads, pauses, resumes, ticks and
	// deletes them; every monitor sweep fires what is due, and so does the
	// processor's tick (whimbrel-lambda on its EventBridge event runs the
	// same schedule.Tick as whimbrel schedule tick, under the processor's
	// role: the processor's proxy stands in for it, as the poller stands in
	// for its stream batches). "chain" counts iam-ok's completions.
	op("schedule", "set", "pulse", ok, "--every", "1s", "--catchup", "latest", "--overlap", "allow")
	op("schedule", "set", "chain", bad, "--after", "iam-ok")
	for _, name := range []string{"pulse", "chain"} {
		waitUntil(t, "schedule "+name+" fires", func() bool {
			out, _, code := whimbrelIn(t, t.TempDir(), base, "schedule", "show", "--json", name)
			var v struct {
				Log []json.RawMessage `json:"run_log"`
			}
			return code == 0 && json.Unmarshal([]byte(out), &v) == nil && len(v.Log) > 0
		})
	}
	op("schedule", "list")
	op("schedule", "show", "pulse")
	op("schedule", "pause", "pulse")
	op("schedule", "resume", "pulse")
	op("schedule", "tick")
	if out, errOut, code := whimbrelIn(t, t.TempDir(), envs["whimbrel-processor"], "schedule", "tick"); code != 0 {
		t.Fatalf("the processor's schedule tick: exit %d\n%s\n%s", code, out, errOut)
	}
	op("schedule", "delete", "pulse")
	op("schedule", "delete", "chain")

	op("pool", "list")
	op("pool", "show", "iam-pool")
	op("pool", "delete", "iam-pool")
	op("status", okID)
	op("list")
	op("stats")
	op("registered")
	op("rerun", "--from-failure", badID)
	time.Sleep(2 * time.Second) // the daemons finish what they were doing

	if path := os.Getenv("WHIMBREL_IAM_DUMP"); path != "" {
		// For people updating the policies: what each binary called.
		dump := map[string][]string{}
		for role, r := range roles {
			for k := range r.needs() {
				dump[role] = append(dump[role], k)
			}
			sort.Strings(dump[role])
		}
		b, _ := json.MarshalIndent(dump, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The scenario fires schedules: every ticker was seen reading the due
	// index, and each call firing lists was seen from one of them (so the
	// list, granted whether or not a run reaches it, names real calls).
	tickers := []string{"whimbrel-monitor", "whimbrel-operator", "whimbrel-processor"}
	seen := map[string]bool{}
	for _, role := range tickers {
		calls := roles[role].needs()
		if !calls["dynamodb:Query table/whimbrel_schedule/index/due-index"] {
			t.Errorf("%s never read the due index: the scenario does not have it fire schedules", role)
		}
		for k := range calls {
			seen[k] = true
		}
	}
	for _, k := range firing {
		if !seen[k] {
			t.Errorf("firing lists %s, which no binary that fires schedules called", k)
		}
	}
	for role, r := range roles {
		needed := r.needs()
		granted := grants(t, role)
		for _, k := range mayCall[role] {
			if !granted[k] {
				t.Errorf("%s: policy lacks %s, which the binary may call", role, k)
			}
			needed[k] = true
		}
		missing, extra := compare(granted, needed)
		for _, m := range missing {
			t.Errorf("%s: policy lacks %s, which the binary calls", role, m)
		}
		for _, e := range extra {
			t.Errorf("%s: policy grants %s, which the binary never called", role, e)
		}
	}

	// Negative control: a policy without one needed action fails the check.
	needed := roles["whimbrel-run"].needs()
	granted := grants(t, "whimbrel-run")
	var one string
	for k := range needed {
		one = k
		break
	}
	delete(granted, one)
	if missing, _ := compare(granted, needed); !slices.Equal(missing, []string{one}) {
		t.Errorf("negative control: removing %q from the policy was not noticed (missing %v)", one, missing)
	}
}

// TestIAMPoliciesArePinned: every resource in examples/iam names its
// partition, region and account through CloudFormation's pseudo
// parameters (the policies are Fn::Sub bodies), never "*"; the only
// resource left open is the tagging of the tasks the launcher starts, and
// that only under its RunTask; and the launcher may run tasks on its own
// cluster only.
func TestIAMPoliciesArePinned(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "iam", "*.json"))
	if err != nil || len(files) < 6 {
		t.Fatalf("policies: %v, %v; want the six of examples/iam", files, err)
	}
	pinned := regexp.MustCompile(`^arn:\$\{AWS::Partition\}:(dynamodb|ecs|events):\$\{AWS::Region\}:\$\{AWS::AccountId\}:[a-z-]+/[A-Za-z0-9_.\-]+|^arn:\$\{AWS::Partition\}:iam::\$\{AWS::AccountId\}:role/[A-Za-z0-9_+=,.@\-]+$`)
	type statement struct {
		Sid       string
		Action    []string
		Resource  json.RawMessage
		Condition map[string]map[string]string
	}
	var runTask *statement
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var policy struct{ Statement []statement }
		if err := json.Unmarshal(b, &policy); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for i, s := range policy.Statement {
			var resources []string
			if err := json.Unmarshal(s.Resource, &resources); err != nil {
				var one string
				_ = json.Unmarshal(s.Resource, &one)
				resources = []string{one}
			}
			for _, r := range resources {
				switch {
				case r == "*" && slices.Equal(s.Action, []string{"ecs:TagResource"}) && s.Condition["StringEquals"]["ecs:CreateAction"] == "RunTask":
				case !pinned.MatchString(r):
					t.Errorf("%s, %s: resource %q is not pinned to ${AWS::Partition}, ${AWS::Region} and ${AWS::AccountId}", filepath.Base(f), s.Sid, r)
				}
			}
			if slices.Contains(s.Action, "ecs:RunTask") {
				runTask = &policy.Statement[i]
			}
		}
	}
	if runTask == nil {
		t.Fatal("no policy grants ecs:RunTask")
	}
	if c := runTask.Condition["ArnEquals"]["ecs:cluster"]; !pinned.MatchString(c) || !strings.Contains(c, ":cluster/") {
		t.Errorf("ecs:RunTask is not conditioned on a pinned cluster ARN (ArnEquals ecs:cluster): %v", runTask.Condition)
	}
}
