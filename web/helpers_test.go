package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

const testToken = "test-token-0123456789abcdef"

// diamond is a workflow with a fan-out and a fan-in.
const diamond = `name: diamond
activities:
  extract: {command: [sh, -c, "true"]}
  left: {depends_on: [extract], command: [sh, -c, "true"]}
  right: {depends_on: [extract], command: [sh, -c, "true"]}
  load: {depends_on: [left, right], command: [sh, -c, "true"]}
`

func sqliteStore(t testing.TB) state.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatalf("install: %v", err)
	}
	return st
}

func dynamoStore(t testing.TB) state.Store {
	t.Helper()
	return dynamotest.NewStore(t, dynamodb.Options{})
}

func start(t testing.TB, st workflow.Starter, def string) string {
	t.Helper()
	d, err := definition.Parse("test.yaml", []byte(def))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{Source: "test"})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return id
}

func key(id, name string) state.ActivityKey {
	return state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, name), WorkflowExecID: id}
}

// claim moves a READY activity to RUNNING, as a wrapper does.
func claim(t testing.TB, st workflow.Mover, id, name string) {
	t.Helper()
	_, err := st.UpdateActivity(context.Background(), key(id, name), state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: &state.Claim{Owner: "owner-" + name, Host: "testhost", PID: 4242, HeartbeatEnabled: true,
			HeartbeatInterval: 15 * time.Second, HeartbeatTimeout: 60 * time.Second},
	})
	if err != nil {
		t.Fatalf("claim %s: %v", name, err)
	}
}

// finish ends a RUNNING activity and advances the workflow, as a wrapper
// does.
func finish(t testing.TB, st workflow.Advancer, id, name string, code int, stderr string) {
	t.Helper()
	to := state.Completed
	if code != 0 {
		to = state.Failed
	}
	a, err := st.UpdateActivity(context.Background(), key(id, name), state.ActivityChange{
		From: []state.ActivityState{state.Running}, To: to, Owner: "owner-" + name,
		Exit: &state.Exit{Code: code}, Error: stderr,
	})
	if err != nil {
		t.Fatalf("finish %s: %v", name, err)
	}
	if _, err := workflow.Advance(context.Background(), st, a, nil); err != nil {
		t.Fatalf("advance after %s: %v", name, err)
	}
}

type client struct {
	t   testing.TB
	url string
}

func serve(t testing.TB, opts Options) (*Server, *client) {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, &client{t: t, url: ts.URL}
}

type answer struct {
	code   int
	header http.Header
	body   string
}

// do sends a request; setup adds headers. Redirects are not followed.
func (c *client) do(method, path string, body io.Reader, setup func(*http.Request)) answer {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, body)
	if err != nil {
		c.t.Fatalf("request: %v", err)
	}
	if setup != nil {
		setup(req)
	}
	hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

func cookie(s *Server) func(*http.Request) {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: s.keys.cookie}) }
}

// form is a browser's form post: the cookie, and a form body.
func form(s *Server) func(*http.Request) {
	return func(r *http.Request) {
		r.AddCookie(&http.Cookie{Name: CookieName, Value: s.keys.cookie})
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
}

func formBody(s *Server, csrf bool, extra string) io.Reader {
	v := extra
	if csrf {
		if v != "" {
			v += "&"
		}
		v += "csrf=" + s.keys.csrf
	}
	return strings.NewReader(v)
}

// countingStore counts the reads made through it. It wraps only the
// web's Store, so no read can reach the store uncounted.
type countingStore struct {
	Store
	mu         sync.Mutex
	calls      map[string]int
	activities int // activity items read
}

func newCounting(st Store) *countingStore {
	return &countingStore{Store: st, calls: map[string]int{}}
}

func (c *countingStore) count(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

func (c *countingStore) total() (calls, items int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		calls += n
	}
	return calls, c.activities + c.calls["GetWorkflow"]
}

func (c *countingStore) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	c.count("GetWorkflow")
	return c.Store.GetWorkflow(ctx, id)
}

func (c *countingStore) Activities(ctx context.Context, id string) ([]*state.ActivityExec, error) {
	c.count("Activities")
	acts, err := c.Store.Activities(ctx, id)
	c.mu.Lock()
	c.activities += len(acts)
	c.mu.Unlock()
	return acts, err
}

func (c *countingStore) Workflows(ctx context.Context, q state.WorkflowQuery) ([]*state.WorkflowExec, error) {
	c.count("Workflows")
	return c.Store.Workflows(ctx, q)
}

// clock is a test's clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// forgetAll forgets every address's failed authentications.
func (f *failures) forgetAll() {
	f.mu.Lock()
	clear(f.by)
	f.mu.Unlock()
}
