package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/notify"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// testStore is what the tests need of a store: every store is one.
type testStore interface {
	state.Store
	state.Notifications
}

// kinds are the stores the tests run on: the embedded store, DynamoDB
// Local, and DynamoDB Local behind the fault proxy (throttling, errors
// after a write was applied, lagging indexes).
var kinds = []string{"sqlite", "dynamodb", "faulty"}

func open(t *testing.T, kind string) testStore {
	st, _ := open2(t, kind)
	return st
}

// open2 returns the store, and one for the test's own setup that reaches
// the same tables without faults.
func open2(t *testing.T, kind string) (testStore, testStore) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch kind {
	case "sqlite":
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "whimbrel.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.Install(ctx, false); err != nil {
			t.Fatal(err)
		}
		return st, st
	case "dynamodb":
		st := dynamotest.NewStore(t, dynamodb.Options{})
		return st, st
	}
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.1, AfterWrite: 0.5,
		IndexLags: map[string]time.Duration{"due-index": 500 * time.Millisecond}})
	prefix := dynamotest.Prefix(t)
	clean := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	if _, err := clean.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	return dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout}), clean
}

// hit is one request a receiver took.
type hit struct {
	ID, Signature, Event string
	Body                 workflow.Body
	Raw                  []byte
	Status               int
}

// receiver is a local webhook: answer decides each request's status by
// its place (0 first), or hangs it (status 0) until the client gives up.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(i int) int
}

func newReceiver(t *testing.T, answer func(i int) int) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		h := hit{ID: req.Header.Get(notify.HeaderDeliveryID), Signature: req.Header.Get(notify.HeaderSignature),
			Event: req.Header.Get(notify.HeaderEvent), Raw: raw}
		_ = json.Unmarshal(raw, &h.Body)
		r.mu.Lock()
		i := len(r.hits)
		h.Status = 200
		if r.answer != nil {
			h.Status = r.answer(i)
		}
		r.hits = append(r.hits, h)
		r.mu.Unlock()
		if h.Status == 0 {
			select { // hang until the deliverer cuts it off
			case <-req.Context().Done():
			case <-time.After(time.Minute):
			}
			return
		}
		w.WriteHeader(h.Status)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) all() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// ok counts the requests answered 2xx, by delivery ID.
func (r *receiver) ok() map[string]int {
	out := map[string]int{}
	for _, h := range r.all() {
		if h.Status >= 200 && h.Status < 300 {
			out[h.ID]++
		}
	}
	return out
}

// def is a two-activity workflow notifying url of what is in on.
func def(t *testing.T, name, url, on, extra string) *definition.Workflow {
	t.Helper()
	d, err := definition.Parse("t.yaml", []byte(`name: `+name+`
params:
  region: {default: eu}
activities:
  extract:
    command: ["true"]
  load:
    depends_on: [extract]
    command: ["true"]
notify:
  - on: [`+on+`]
    webhook: {url: "`+url+`", secret_env: WHIMBREL_TEST_HOOK_SECRET}
`+extra))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// start starts d and returns its execution, trying again (as a client
// does, with the same request) when a faulty store fails it.
func start(t *testing.T, st testStore, d *definition.Workflow) string {
	t.Helper()
	opts := workflow.StartOptions{RequestID: uuid.NewString()}
	var err error
	for i := 0; i < 10; i++ {
		var id string
		if id, _, err = workflow.Start(ctx(t), st, d, opts); err == nil {
			return id
		}
	}
	t.Fatal(err)
	return ""
}

// fail runs the first activity of an execution to a failure, as its
// wrapper does, and advances the workflow (which settles it).
func fail(t *testing.T, st testStore, id string) {
	t.Helper()
	failWith(t, st, st, id)
}

// failWith makes the activity's moves on setup, and advances on st,
// trying again when a faulty store fails it.
func failWith(t *testing.T, st, setup testStore, id string) {
	t.Helper()
	k := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "extract"), WorkflowExecID: id}
	c := ctx(t)
	if _, err := setup.UpdateActivity(c, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: &state.Claim{Owner: "w1", Host: "h"}}); err != nil {
		t.Fatal(err)
	}
	a, err := setup.UpdateActivity(c, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: state.Failed, Owner: "w1",
		Exit: &state.Exit{Code: 3}, Error: "line 1\nline 2\n<script>alert(1)</script> \x1b[31mred\n"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err = workflow.Advance(c, st, a, nil); err == nil {
			return
		}
		if i == 10 {
			t.Fatal(err)
		}
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// until calls f until it is true, for at most a minute.
func until(t *testing.T, what string, f func() bool) {
	t.Helper()
	end := time.Now().Add(time.Minute)
	for !f() {
		if time.Now().After(end) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deliverer returns a deliverer on st whose waits suit a test.
func deliverer(st testStore, cfg notify.Config) *notify.Deliverer {
	if cfg.Interval == 0 {
		cfg.Interval = 100 * time.Millisecond
	}
	if cfg.FirstRetry == 0 {
		cfg.FirstRetry = 100 * time.Millisecond
	}
	if os.Getenv("NOTIFY_TEST_LOG") != "" {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Debug})
	}
	return notify.New(st, cfg)
}

// run runs a deliverer until the test ends.
func run(t *testing.T, d *notify.Deliverer) {
	c, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(c) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the deliverer did not stop within a minute")
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func urlEscape(s string) string { return url.PathEscape(s) }
