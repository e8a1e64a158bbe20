package launcher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ecs"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/workflow"
)

// fakeECS is an httptest server speaking ECS's JSON protocol for RunTask.
// Like ECS, it starts one task per clientToken and answers a repeat of a
// token with the task it already started. What it answers depends on the
// task definition asked for:
//
//	ok             start the task
//	hang-once      start the task, then answer nothing until the caller gives up; answer repeats
//	hang           answer nothing, ever
//	throttle-N     ThrottlingException for the first N requests of a token
//	agent-N        a failure with reason AGENT for the first N requests of a token
//	capacity-N     a failure "Capacity is unavailable at this time…" for the first N
//	server-N       a 500 ServerException for the first N
//	client-error   ClientException
//	missing        a failure with reason MISSING
//	lose-answer    start the task, then drop the connection, once per token
//
// Every answer comes after Latency.
type fakeECS struct {
	Latency time.Duration
	URL     string

	mu       sync.Mutex
	requests []fakeRequest
	tasks    map[string]string // clientToken → task ARN
	seen     map[string]int    // requests per clientToken
	answered map[string]time.Time
	release  chan struct{} // closed at cleanup: hanging requests end
}

type fakeRequest struct {
	Token, TaskDefinition string
	Body                  map[string]any
}

func newFakeECS(t testing.TB) (*fakeECS, *ecs.Client) {
	t.Helper()
	f := &fakeECS{tasks: map[string]string{}, seen: map[string]int{}, answered: map[string]time.Time{}, release: make(chan struct{})}
	ts := httptest.NewServer(f)
	f.URL = ts.URL
	t.Cleanup(func() {
		close(f.release)
		ts.Close()
	})
	// One SDK attempt per call: what is retried, and how, is the
	// launcher's doing here.
	client := ecs.New(ecs.Options{
		Region:           "eu-west-1",
		BaseEndpoint:     aws.String(ts.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("k", "s", ""),
		RetryMaxAttempts: 1,
	})
	return f, client
}

func (f *fakeECS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if got := r.Header.Get("X-Amz-Target"); got != "AmazonEC2ContainerServiceV20141113.RunTask" {
		http.Error(w, "unexpected target "+got, http.StatusBadRequest)
		return
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tok, _ := req["clientToken"].(string)
	td, _ := req["taskDefinition"].(string)
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{Token: tok, TaskDefinition: td, Body: req})
	f.seen[tok]++
	n := f.seen[tok]
	f.mu.Unlock()

	select {
	case <-time.After(f.Latency):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	var limit int
	kind := td
	if i := strings.LastIndex(td, "-"); i > 0 {
		if _, err := fmt.Sscan(td[i+1:], &limit); err == nil {
			kind = td[:i]
		}
	}
	fail := func(reason string) {
		fmt.Fprintf(w, `{"tasks":[],"failures":[{"arn":"arn:aws:ecs:eu-west-1:123456789012:container-instance/batch/1","reason":%q}]}`, reason)
	}
	switch {
	case kind == "hang":
		f.hang(r)
		return
	case kind == "hang-once" && n == 1:
		f.start(tok)
		f.hang(r)
		return
	case kind == "throttle" && n <= limit:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ThrottlingException","message":"Rate exceeded"}`)
		return
	case kind == "agent" && n <= limit:
		fail("AGENT")
		return
	case kind == "capacity" && n <= limit:
		fail("Capacity is unavailable at this time. Please try again later or in a different availability zone")
		return
	case kind == "server" && n <= limit:
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"__type":"ServerException","message":"Service unavailable"}`)
		return
	case kind == "client-error":
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"__type":"ClientException","message":"TaskDefinition is inactive"}`)
		return
	case kind == "missing":
		fail("MISSING")
		return
	case kind == "lose-answer" && n == 1:
		f.start(tok)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	arn := f.start(tok)
	fmt.Fprintf(w, `{"tasks":[{"taskArn":%q,"lastStatus":"PROVISIONING"}],"failures":[]}`, arn)
}

// start starts the token's task, once, and returns its ARN.
func (f *fakeECS) start(tok string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if arn, ok := f.tasks[tok]; ok {
		return arn
	}
	arn := fmt.Sprintf("arn:aws:ecs:eu-west-1:123456789012:task/batch/%d-%s", len(f.tasks), tok)
	f.tasks[tok] = arn
	f.answered[tok] = time.Now()
	return arn
}

func (f *fakeECS) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.release:
	}
}

func (f *fakeECS) counts(td string) (requests, tasks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	toks := map[string]bool{}
	for _, r := range f.requests {
		if r.TaskDefinition == td {
			requests++
			toks[r.Token] = true
		}
	}
	for tok := range toks {
		if _, ok := f.tasks[tok]; ok {
			tasks++
		}
	}
	return requests, tasks
}

// ecsActivities writes a workflow whose activities run the given task
// definitions.
func ecsActivities(name string, taskDefs map[string]string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s\nactivities:\n", name)
	for act, td := range taskDefs {
		fmt.Fprintf(&b, "  %s:\n    command: [run, %s]\n    launch: {type: ecs, cluster: batch, task_definition: %s, container: main%s}\n", act, act, td, extra)
	}
	return b.String()
}

func activity(t *testing.T, st state.Store, wf, name string) *state.ActivityExec {
	t.Helper()
	a, err := st.GetActivity(testbin.Context(t), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(wf, name), WorkflowExecID: wf})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func fastRetries(cfg launcher.Config) launcher.Config {
	cfg.RetryInterval = 10 * time.Millisecond
	return cfg
}

// TestECSHangingRunTask: one RunTask that gets no answer does not hold up
// the other activities, and still ends recorded: with the task ECS
// started, found again under the same clientToken, or failed with why
// when ECS never answers.
func TestECSHangingRunTask(t *testing.T) {
	t.Parallel()
	fake, client := newFakeECS(t)
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, ecsActivities("hanging", map[string]string{
		"slow": "hang-once", "dead": "hang", "a": "ok", "b": "ok", "c": "ok",
	}, ", retry_for: 4s"))
	l := launcher.New(st, fastRetries(launcher.Config{
		Backends:    map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}},
		CallTimeout: 2 * time.Second,
	}))
	began := time.Now()
	n, err := l.Once(testbin.Context(t))
	if err != nil || n != 4 {
		t.Fatalf("Once: launched %d, %v; want 4 (all but the one ECS never answers)", n, err)
	}
	for _, name := range []string{"a", "b", "c"} {
		a := activity(t, st, id, name)
		if a.State != state.Queued || !strings.HasPrefix(a.LaunchedAs, "arn:aws:ecs:") {
			t.Errorf("%s: %s launched as %q", name, a.State, a.LaunchedAs)
		}
	}
	// The ordinary ones were started while the slow one was still waiting
	// for its answer, not after.
	fake.mu.Lock()
	for _, r := range fake.requests {
		if r.TaskDefinition == "ok" && fake.answered[r.Token].Sub(began) > 1800*time.Millisecond {
			t.Errorf("an ordinary activity started %s after the pass began: it waited behind the hanging one", fake.answered[r.Token].Sub(began))
		}
	}
	fake.mu.Unlock()

	slow := activity(t, st, id, "slow")
	if req, tasks := fake.counts("hang-once"); slow.State != state.Queued || req != 2 || tasks != 1 {
		t.Errorf("slow: %s, %d requests and %d tasks; want QUEUED after 2 requests for 1 task", slow.State, req, tasks)
	}
	fake.mu.Lock()
	want := ""
	for tok, arn := range fake.tasks {
		if strings.HasSuffix(slow.LaunchedAs, tok) {
			want = arn
		}
	}
	fake.mu.Unlock()
	if want == "" || slow.LaunchedAs != want {
		t.Errorf("slow launched as %q, want the task ECS started on the first request (%q)", slow.LaunchedAs, want)
	}

	dead := activity(t, st, id, "dead")
	if dead.State != state.Failed || !strings.Contains(dead.Reason, "launch failed: gave up after") ||
		!strings.Contains(dead.Reason, "no answer within 2s") {
		t.Errorf("dead: %s, reason %q; want FAILED naming the timeout", dead.State, dead.Reason)
	}
	if req, _ := fake.counts("hang"); req < 2 {
		t.Errorf("the unanswered launch was tried %d times, want it retried", req)
	}
}

// TestECSTemporaryErrors: throttling, server errors, AGENT and capacity failures are
// retried under the same clientToken until ECS starts the task, once.
func TestECSTemporaryErrors(t *testing.T) {
	t.Parallel()
	fake, client := newFakeECS(t)
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, ecsActivities("temporary", map[string]string{
		"throttled": "throttle-6", "agent": "agent-2", "capacity": "capacity-3", "server": "server-2",
	}, ""))
	l := launcher.New(st, fastRetries(launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}}}))
	if n, err := l.Once(testbin.Context(t)); n != 4 || err != nil {
		t.Fatalf("Once: launched %d, %v; want 4", n, err)
	}
	for name, tc := range map[string]struct {
		td       string
		requests int
	}{"throttled": {"throttle-6", 7}, "agent": {"agent-2", 3}, "capacity": {"capacity-3", 4}, "server": {"server-2", 3}} {
		a := activity(t, st, id, name)
		req, tasks := fake.counts(tc.td)
		if a.State != state.Queued || !strings.HasPrefix(a.LaunchedAs, "arn:aws:ecs:") || req != tc.requests || tasks != 1 {
			t.Errorf("%s: %s launched as %q after %d requests, %d tasks; want QUEUED with a task after %d requests, 1 task",
				name, a.State, a.LaunchedAs, req, tasks, tc.requests)
		}
	}
}

// TestECSSustainedThrottling: sixty activities whose every RunTask is
// throttled three times, through the client a launcher uses in production
// (the SDK's own retries, no retry quota), all start, once each.
func TestECSSustainedThrottling(t *testing.T) {
	t.Parallel()
	fake, _ := newFakeECS(t)
	client := launcher.NewECSClient(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(fake.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	st := dynamotest.NewStore(t, dynamodb.Options{})
	tds := map[string]string{}
	for i := 0; i < 60; i++ {
		tds[fmt.Sprintf("a%02d", i)] = "throttle-3"
	}
	id, _ := start(t, st, ecsActivities("throttled", tds, ""))
	l := launcher.New(st, fastRetries(launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}}}))
	if n, err := l.Once(testbin.Context(t)); n != 60 || err != nil {
		t.Fatalf("Once: launched %d, %v; want 60", n, err)
	}
	req, tasks := fake.counts("throttle-3")
	if tasks != 60 || req != 60*4 {
		t.Errorf("%d tasks after %d requests, want 60 after 240", tasks, req)
	}
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range acts {
		if a.State != state.Queued || !strings.HasPrefix(a.LaunchedAs, "arn:aws:ecs:") {
			t.Errorf("%s: %s launched as %q", a.ActivityName, a.State, a.LaunchedAs)
		}
	}
}

// TestECSPermanentErrors: an error that needs someone to change something
// fails the activity at once with ECS's message, after one request; the
// overrides that ECS would refuse for their size are refused before ECS
// is called; a temporary error that outlasts retry_for fails with the last
// reason.
func TestECSPermanentErrors(t *testing.T) {
	t.Parallel()
	fake, client := newFakeECS(t)
	st := dynamotest.NewStore(t, dynamodb.Options{})
	id, _ := start(t, st, ecsActivities("permanent", map[string]string{
		"inactive": "client-error", "missing": "missing", "throttled": "throttle-1000",
	}, ", retry_for: 1s"))
	big := "name: big\nactivities:\n  huge:\n    command: [run]\n    env: {BLOB: '" + strings.Repeat("x", 9000) + "'}\n" +
		"    launch: {type: ecs, task_definition: ok, container: main}\n"
	bigID, _ := start(t, st, big)
	l := launcher.New(st, fastRetries(launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}}}))
	began := time.Now()
	if n, err := l.Once(testbin.Context(t)); n != 0 || err != nil {
		t.Fatalf("Once: launched %d, %v; want 0", n, err)
	}
	for _, tc := range []struct {
		name, td, reason string
		requests         int
	}{
		{"inactive", "client-error", "launch failed: ecs RunTask client-error: operation error ECS: RunTask", 1},
		{"missing", "missing", "launch failed: ecs RunTask missing: MISSING", 1},
		{"throttled", "throttle-1000", "launch failed: gave up after", 0},
	} {
		a := activity(t, st, id, tc.name)
		req, tasks := fake.counts(tc.td)
		if a.State != state.Failed || !strings.Contains(a.Reason, tc.reason) || (tc.requests > 0 && req != tc.requests) || tasks != 0 {
			t.Errorf("%s: %s, reason %q, %d requests, %d tasks; want FAILED with %q after %d", tc.name, a.State, a.Reason, req, tasks, tc.reason, tc.requests)
		}
	}
	if a := activity(t, st, id, "inactive"); !strings.Contains(a.Reason, "TaskDefinition is inactive") {
		t.Errorf("inactive: reason %q lacks ECS's message", a.Reason)
	}
	if a := activity(t, st, id, "throttled"); !strings.Contains(a.Reason, "Rate exceeded") {
		t.Errorf("throttled: reason %q lacks the last error", a.Reason)
	}
	if el := time.Since(began); el > 20*time.Second {
		t.Errorf("the pass took %s: retry_for 1s was not honoured", el)
	}
	huge := activity(t, st, bigID, "huge")
	if huge.State != state.Failed || !strings.Contains(huge.Reason, "more than the 8192 RunTask accepts") || !strings.Contains(huge.Reason, "env takes") {
		t.Errorf("huge: %s, reason %q; want FAILED for the size of its overrides", huge.State, huge.Reason)
	}
	if req, _ := fake.counts("ok"); req != 0 {
		t.Errorf("ECS was called %d times for overrides too large to send", req)
	}
	if wf, err := st.GetWorkflow(testbin.Context(t), id); err != nil || wf.State != state.WorkflowFailed {
		t.Errorf("workflow after failed launches: %+v, %v", wf, err)
	}
}

// TestECSThreeLaunchersFiftyActivities: three launchers racing over fifty
// ECS activities, with an answer lost now and then, start exactly fifty
// tasks: one client token per activity, repeats deduplicated.
func TestECSThreeLaunchersFiftyActivities(t *testing.T) {
	t.Parallel()
	fake, client := newFakeECS(t)
	fake.Latency = 20 * time.Millisecond
	st := dynamotest.NewStore(t, dynamodb.Options{})
	tds := map[string]string{}
	for i := 0; i < 50; i++ {
		td := "ok"
		if i%5 == 0 {
			td = "lose-answer"
		}
		tds[fmt.Sprintf("a%02d", i)] = td
	}
	id, _ := start(t, st, ecsActivities("fifty", tds, ""))
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		l := launcher.New(st, fastRetries(launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}}}))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Once(testbin.Context(t)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.tasks) != 50 || len(fake.seen) != 50 {
		t.Errorf("%d tasks from %d client tokens, want 50 from 50", len(fake.tasks), len(fake.seen))
	}
	repeats := 0
	for _, n := range fake.seen {
		repeats += n - 1
	}
	if repeats < 10 {
		t.Errorf("%d repeated requests, want at least the 10 whose answer was lost", repeats)
	}
	acts, err := st.Activities(testbin.Context(t), id)
	if err != nil {
		t.Fatal(err)
	}
	arns := map[string]bool{}
	for _, a := range acts {
		if a.State != state.Queued || !strings.HasPrefix(a.LaunchedAs, "arn:aws:ecs:") {
			t.Errorf("%s: %s launched as %q", a.ActivityName, a.State, a.LaunchedAs)
		}
		arns[a.LaunchedAs] = true
	}
	if len(arns) != 50 {
		t.Errorf("%d distinct task ARNs recorded, want 50", len(arns))
	}
}

// TestConcurrentLaunchesHonourMaxRunning: launches run side by side, never
// more at once than the workers, never more in all than --max-running.
func TestConcurrentLaunchesHonourMaxRunning(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	start(t, st, manyActivities("wide", 30, ""))
	backend := &gauge{delay: 300 * time.Millisecond}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}, Workers: 4, MaxRunning: 10})
	began := time.Now()
	n, err := l.Once(testbin.Context(t))
	took := time.Since(began)
	if n != 10 || err != nil {
		t.Fatalf("Once: launched %d, %v; want the cap of 10", n, err)
	}
	if backend.peak != 4 {
		t.Errorf("at most %d launches at once, want the 4 workers", backend.peak)
	}
	if took >= 3*time.Second {
		t.Errorf("10 launches of 300 ms on 4 workers took %s, as long as one at a time", took)
	}
}

// TestFairAcrossWorkflows: a workflow with many ready activities does not
// crowd out one with few.
func TestFairAcrossWorkflows(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	start(t, st, manyActivities("big", 60, ""))
	small, _ := start(t, st, manyActivities("small", 3, ""))
	backend := &counting{}
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{workflow.LaunchLocal: backend}, MaxRunning: 6, Workers: 1})
	if n, err := l.Once(testbin.Context(t)); n != 6 || err != nil {
		t.Fatalf("Once: %d, %v", n, err)
	}
	got := 0
	for k := range backend.launches {
		if k.WorkflowExecID == small {
			got++
		}
	}
	if got != 3 {
		t.Errorf("the small workflow got %d of the 6 launches, want its 3", got)
	}
}

// gauge is a backend that takes delay per launch and records the most
// launches it saw at once.
type gauge struct {
	delay time.Duration
	mu    sync.Mutex
	now   int
	peak  int
}

func (g *gauge) Launch(ctx context.Context, j launcher.Job) (string, error) {
	g.mu.Lock()
	g.now++
	g.peak = max(g.peak, g.now)
	g.mu.Unlock()
	time.Sleep(g.delay)
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
	return "test:" + j.ActivityName, nil
}

// TestRunDoesNotWaitForSlowLaunches: in the daemon, a launch waiting on an
// unanswered RunTask holds up neither the next poll nor activities readied
// meanwhile; stopping the launcher lets that call finish, retries it no
// more, and records why the activity did not start.
func TestRunDoesNotWaitForSlowLaunches(t *testing.T) {
	t.Parallel()
	fake, client := newFakeECS(t)
	st := dynamotest.NewStore(t, dynamodb.Options{})
	slowID, _ := start(t, st, ecsActivities("stuck", map[string]string{"stuck": "hang"}, ""))
	l := launcher.New(st, fastRetries(launcher.Config{
		Backends:    map[string]launcher.Backend{workflow.LaunchECS: &launcher.ECS{API: client}},
		Interval:    100 * time.Millisecond,
		CallTimeout: 3 * time.Second,
	}))
	ctx, cancel := context.WithCancel(testbin.Context(t))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the stuck RunTask", func() bool { req, _ := fake.counts("hang"); return req == 1 })
	fastID, _ := start(t, st, ecsActivities("fast", map[string]string{"fast": "ok"}, ""))
	began := time.Now()
	waitFor("the fast launch", func() bool { return activity(t, st, fastID, "fast").LaunchedAs != "" })
	if took := time.Since(began); took > 2500*time.Millisecond {
		t.Errorf("the fast activity waited %s behind the stuck one", took)
	}
	if req, _ := fake.counts("hang"); req != 1 {
		t.Fatalf("the stuck launch was tried %d times before the stop, want 1 (its call is still under way)", req)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
	stuck := activity(t, st, slowID, "stuck")
	if stuck.State != state.Failed || !strings.Contains(stuck.Reason, "the launcher stopped while retrying") || !strings.Contains(stuck.Reason, "no answer within 3s") {
		t.Errorf("stuck: %s, reason %q; want FAILED saying the launcher stopped", stuck.State, stuck.Reason)
	}
	if req, _ := fake.counts("hang"); req != 1 {
		t.Errorf("the stuck launch was tried %d times, want no retry after the stop", req)
	}
}
