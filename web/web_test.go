package web

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

func TestEveryRouteRefusesWithoutAValidToken(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, diamond)
	s, c := serve(t, Options{Store: st, AllowActions: true})
	p := "/workflows/" + url.PathEscape(id)
	routes := []struct{ method, path string }{
		{"GET", "/"},
		{"GET", p},
		{"GET", "/fragments/workflows"},
		{"GET", "/fragments" + p},
		{"GET", "/api/workflows"},
		{"GET", "/api" + p},
		{"POST", p + "/cancel"},
		{"POST", p + "/rerun"},
		{"POST", "/api" + p + "/cancel"},
		{"GET", "/static/style.css"},
		{"GET", "/schedules"},
		{"GET", "/schedules/nightly"},
		{"GET", "/fragments/schedules"},
		{"GET", "/fragments/schedules/nightly"},
		{"GET", "/api/schedules"},
		{"GET", "/api/schedules/nightly"},
		{"GET", "/no/such/page"},
	}
	wrongCookie := func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: "forged"}) }
	rawToken := func(r *http.Request) { r.AddCookie(&http.Cookie{Name: CookieName, Value: testToken}) }
	for _, rt := range routes {
		for _, how := range []struct {
			name  string
			setup func(*http.Request)
		}{
			{"no token", nil},
			{"wrong bearer", bearer("wrong-token-0123456789abcdef")},
			{"bearer with the token's prefix", bearer(testToken[:len(testToken)-1])},
			{"wrong cookie", wrongCookie},
			{"the token itself as the cookie", rawToken},
			{"basic auth", func(r *http.Request) { r.SetBasicAuth("x", testToken) }},
		} {
			// Each attempt on its own: the limit of failures per address
			// (TestFailedAuthenticationsAreLoggedAndSlowed) would answer
			// 429 before the credential is even compared.
			s.fails.forgetAll()
			a := c.do(rt.method, rt.path, nil, how.setup)
			if a.code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: got %d, want 401", rt.method, rt.path, how.name, a.code)
			}
			if strings.Contains(a.body, id) {
				t.Errorf("%s %s with %s: the answer shows the execution", rt.method, rt.path, how.name)
			}
		}
		if rt.method == "GET" {
			s.fails.forgetAll()
			if a := c.do("GET", rt.path+"?token=wrong-token-0123456789abcdef", nil, nil); a.code != http.StatusUnauthorized {
				t.Errorf("GET %s?token=wrong: got %d, want 401", rt.path, a.code)
			}
		}
	}
	// Nothing was cancelled by all those posts.
	if w, err := st.GetWorkflow(context.Background(), id); err != nil || w.State != state.WorkflowRunning {
		t.Fatalf("workflow after refused posts: %v, %v", w, err)
	}
	_ = s
	if a := c.do("GET", "/healthz", nil, nil); a.code != http.StatusOK || !strings.Contains(a.body, "ok") {
		t.Errorf("GET /healthz: got %d %q, want 200 ok (load balancers check it without the token)", a.code, a.body)
	}
}

func TestTokenLinkSetsACookieAndDropsTheToken(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, diamond)
	s, c := serve(t, Options{Store: st})
	p := "/workflows/" + url.PathEscape(id)
	a := c.do("GET", p+"?token="+url.QueryEscape(testToken)+"&x=1", nil, nil)
	if a.code != http.StatusSeeOther {
		t.Fatalf("GET with ?token=: got %d, want 303", a.code)
	}
	loc, err := url.Parse(a.header.Get("Location"))
	if err != nil || loc.Path != p || loc.Query().Has("token") || loc.Query().Get("x") != "1" {
		t.Fatalf("redirect to %q, want %s?x=1 without the token", a.header.Get("Location"), p)
	}
	resp := &http.Response{Header: a.header}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies set: %v, want one", cookies)
	}
	ck := cookies[0]
	if ck.Name != CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" {
		t.Errorf("cookie %+v: want %s, HttpOnly, SameSite=Strict, Path=/", ck, CookieName)
	}
	if strings.Contains(ck.Value, testToken) {
		t.Errorf("the cookie holds the token itself")
	}
	b := c.do("GET", loc.String(), nil, func(r *http.Request) { r.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value}) })
	if b.code != http.StatusOK || !strings.Contains(b.body, id) {
		t.Fatalf("GET with the cookie: got %d, want 200 showing %s", b.code, id)
	}
	_ = s
}

func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) state.Store
	}{{"sqlite", sqliteStore}, {"dynamodb", dynamoStore}} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.open(t)
			id := start(t, st, diamond)
			claim(t, st, id, "extract")
			finish(t, st, id, "extract", 0, "")
			claim(t, st, id, "left")
			_, c := serve(t, Options{Store: st})
			auth := bearer(testToken)
			p := "/workflows/" + url.PathEscape(id)

			list := c.do("GET", "/", nil, auth)
			if list.code != http.StatusOK || !strings.Contains(list.body, id) || !strings.Contains(list.body, "RUNNING") {
				t.Errorf("GET /: got %d, want 200 listing %s RUNNING:\n%s", list.code, id, list.body)
			}
			for _, q := range []string{"?state=RUNNING&since=1h", "?workflow=diamond&since=all"} {
				if a := c.do("GET", "/"+q, nil, auth); !strings.Contains(a.body, id) {
					t.Errorf("GET /%s does not list %s", q, id)
				}
			}
			for _, q := range []string{"?state=FAILED", "?workflow=other"} {
				if a := c.do("GET", "/"+q, nil, auth); a.code != http.StatusOK || strings.Contains(a.body, id) {
					t.Errorf("GET /%s: got %d, and it lists %s, which it must not", q, a.code, id)
				}
			}

			page := c.do("GET", p, nil, auth)
			if page.code != http.StatusOK {
				t.Fatalf("GET %s: %d\n%s", p, page.code, page.body)
			}
			for _, name := range []string{"extract", "left", "right", "load"} {
				if !strings.Contains(page.body, `class="node s-`) || !strings.Contains(page.body, `data-activity="`+name+`"`) {
					t.Errorf("the page shows no node for %s", name)
				}
			}
			for _, want := range []string{`data-activity="extract" data-state="COMPLETED"`, `data-activity="left" data-state="RUNNING"`,
				`data-activity="load" data-state="REQUESTED"`, "testhost pid 4242", "<svg"} {
				if !strings.Contains(page.body, want) {
					t.Errorf("the page lacks %q", want)
				}
			}
			frag := c.do("GET", "/fragments"+p, nil, auth)
			if frag.code != http.StatusOK || strings.Contains(frag.body, "<html") || !strings.Contains(frag.body, `data-activity="left"`) {
				t.Errorf("GET the fragment: %d, want the live part only", frag.code)
			}
			if a := c.do("GET", "/fragments/workflows?since=all", nil, auth); a.code != http.StatusOK || !strings.Contains(a.body, id) {
				t.Errorf("GET the list fragment: %d", a.code)
			}

			// The API answers what status --json prints.
			api := c.do("GET", "/api"+p, nil, auth)
			if api.code != http.StatusOK || !strings.HasPrefix(api.header.Get("Content-Type"), "application/json") {
				t.Fatalf("GET /api%s: %d %s", p, api.code, api.header.Get("Content-Type"))
			}
			var got inspect.Status
			if err := json.Unmarshal([]byte(api.body), &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			want, err := inspect.Load(context.Background(), st, id, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got.Workflow.ID != want.Workflow.ID || got.Workflow.State != want.Workflow.State || len(got.Activities) != len(want.Activities) {
				t.Fatalf("API status %+v, want %+v", got.Workflow, want.Workflow)
			}
			for i := range want.Activities {
				g, w := got.Activities[i], want.Activities[i]
				if g.ID != w.ID || g.State != w.State || g.Depth != w.Depth || g.Attempt != w.Attempt || g.Host != w.Host {
					t.Errorf("activity %d: got %+v, want %+v", i, g, w)
				}
			}
			var raw map[string]any
			json.Unmarshal([]byte(api.body), &raw)
			if _, ok := raw["workflow"].(map[string]any)["workflow_exec_id"]; !ok {
				t.Errorf("the API's field names are not status --json's: %s", api.body)
			}

			var rows []inspect.Workflow
			al := c.do("GET", "/api/workflows?state=RUNNING&since=1h", nil, auth)
			if err := json.Unmarshal([]byte(al.body), &rows); err != nil || len(rows) != 1 || rows[0].ID != id {
				t.Errorf("GET /api/workflows: %d %v %s", al.code, err, al.body)
			}
			if a := c.do("GET", "/api/workflows?state=BOGUS", nil, auth); a.code != http.StatusBadRequest {
				t.Errorf("GET /api/workflows?state=BOGUS: %d, want 400", a.code)
			}
			if a := c.do("GET", "/api/workflows?since=soon", nil, auth); a.code != http.StatusBadRequest {
				t.Errorf("GET /api/workflows?since=soon: %d, want 400", a.code)
			}
			if a := c.do("GET", "/api/workflows?state=FAILED", nil, auth); a.code != http.StatusOK || strings.TrimSpace(a.body) != "[]" {
				t.Errorf("an empty listing: %d %q, want []", a.code, a.body)
			}

			missing := "/workflows/" + url.PathEscape("diamond::00000000-0000-0000-0000-000000000000")
			if a := c.do("GET", missing, nil, auth); a.code != http.StatusNotFound || !strings.Contains(a.body, "Not found") {
				t.Errorf("GET a missing execution: %d, want 404", a.code)
			}
			if a := c.do("GET", "/api"+missing, nil, auth); a.code != http.StatusNotFound || !strings.Contains(a.body, `"error"`) {
				t.Errorf("GET /api of a missing execution: %d %s, want 404 with an error", a.code, a.body)
			}
			if a := c.do("GET", "/static/live.js", nil, auth); a.code != http.StatusOK || !strings.Contains(a.body, "If-None-Match") {
				t.Errorf("GET /static/live.js: %d", a.code)
			}
		})
	}
}

func TestETagAnswers304UntilSomethingChanges(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, diamond)
	clk := &clock{now: time.Now()}
	_, c := serve(t, Options{Store: st, Now: clk.Now})
	auth := bearer(testToken)
	for _, path := range []string{"/fragments/workflows/" + url.PathEscape(id), "/api/workflows/" + url.PathEscape(id), "/fragments/workflows"} {
		first := c.do("GET", path, nil, auth)
		etag := first.header.Get("ETag")
		if first.code != http.StatusOK || etag == "" {
			t.Fatalf("GET %s: %d, ETag %q", path, first.code, etag)
		}
		again := c.do("GET", path, nil, func(r *http.Request) { auth(r); r.Header.Set("If-None-Match", etag) })
		if again.code != http.StatusNotModified || again.body != "" {
			t.Errorf("GET %s with its ETag: %d, want 304 and no body", path, again.code)
		}
		other := c.do("GET", path, nil, func(r *http.Request) { auth(r); r.Header.Set("If-None-Match", `"other"`) })
		if other.code != http.StatusOK {
			t.Errorf("GET %s with another ETag: %d, want 200", path, other.code)
		}
	}
	// The fragment of an execution reads the same while nothing changes,
	// though time passes: ages are left to the page's script.
	path := "/fragments/workflows/" + url.PathEscape(id)
	first := c.do("GET", path, nil, auth)
	clk.advance(time.Minute)
	if a := c.do("GET", path, nil, auth); a.header.Get("ETag") != first.header.Get("ETag") {
		t.Errorf("the fragment changed with the clock alone")
	}
	claim(t, st, id, "extract")
	clk.advance(time.Minute)
	changed := c.do("GET", path, nil, func(r *http.Request) { auth(r); r.Header.Set("If-None-Match", first.header.Get("ETag")) })
	if changed.code != http.StatusOK || !strings.Contains(changed.body, `data-activity="extract" data-state="RUNNING"`) {
		t.Errorf("after a change: %d, want 200 showing extract RUNNING", changed.code)
	}
}

func TestActions(t *testing.T) {
	st := sqliteStore(t)
	t.Run("read-only refuses", func(t *testing.T) {
		id := start(t, st, diamond)
		s, c := serve(t, Options{Store: st})
		p := "/workflows/" + url.PathEscape(id)
		if a := c.do("POST", p+"/cancel", formBody(s, true, ""), form(s)); a.code != http.StatusForbidden || !strings.Contains(a.body, "read-only") {
			t.Errorf("a form post: %d, want 403 read-only", a.code)
		}
		if a := c.do("POST", "/api"+p+"/cancel", nil, bearer(testToken)); a.code != http.StatusForbidden {
			t.Errorf("an API post: %d, want 403", a.code)
		}
		if page := c.do("GET", p, nil, cookie(s)); strings.Contains(page.body, "<form method=\"post\"") {
			t.Errorf("a read-only page shows action buttons")
		}
		if w, _ := st.GetWorkflow(context.Background(), id); w.State != state.WorkflowRunning {
			t.Errorf("the workflow is %s, want RUNNING", w.State)
		}
	})
	t.Run("CSRF", func(t *testing.T) {
		id := start(t, st, diamond)
		s, c := serve(t, Options{Store: st, AllowActions: true})
		p := "/workflows/" + url.PathEscape(id)
		if a := c.do("POST", p+"/cancel", formBody(s, false, ""), form(s)); a.code != http.StatusForbidden {
			t.Errorf("a cookie post without the CSRF value: %d, want 403", a.code)
		}
		if a := c.do("POST", p+"/cancel", strings.NewReader("csrf=forged"), form(s)); a.code != http.StatusForbidden {
			t.Errorf("a cookie post with a forged CSRF value: %d, want 403", a.code)
		}
		crossSite := func(r *http.Request) { form(s)(r); r.Header.Set("Sec-Fetch-Site", "cross-site") }
		if a := c.do("POST", p+"/cancel", formBody(s, true, ""), crossSite); a.code != http.StatusForbidden {
			t.Errorf("a cross-site post, even with the CSRF value: %d, want 403", a.code)
		}
		if w, _ := st.GetWorkflow(context.Background(), id); w.State != state.WorkflowRunning {
			t.Fatalf("the workflow is %s after refused posts, want RUNNING", w.State)
		}
		page := c.do("GET", p, nil, cookie(s))
		if !strings.Contains(page.body, `name="csrf" value="`+s.keys.csrf+`"`) {
			t.Fatalf("the page's cancel form carries no CSRF value")
		}
		a := c.do("POST", p+"/cancel", formBody(s, true, ""), form(s))
		if a.code != http.StatusSeeOther || a.header.Get("Location") != p {
			t.Fatalf("a post from the page: %d to %q, want 303 to %s", a.code, a.header.Get("Location"), p)
		}
		if w, _ := st.GetWorkflow(context.Background(), id); w.State != state.WorkflowCancelled {
			t.Errorf("the workflow is %s, want CANCELLED", w.State)
		}
		if page := c.do("GET", p, nil, cookie(s)); !strings.Contains(page.body, "CANCELLED") {
			t.Errorf("the page does not show the cancellation at once")
		}
		again := c.do("POST", p+"/cancel", formBody(s, true, ""), form(s))
		if again.code != http.StatusSeeOther {
			t.Errorf("cancelling again: %d, want 303 (cancel is idempotent)", again.code)
		}
		// Rerun from failure, from the API.
		r := c.do("POST", "/api"+p+"/rerun?from_failure=1", nil, bearer(testToken))
		var got map[string]string
		if err := json.Unmarshal([]byte(r.body), &got); r.code != http.StatusOK || err != nil || got["workflow_exec_id"] == "" || got["workflow_exec_id"] == id {
			t.Fatalf("rerun: %d %s", r.code, r.body)
		}
		rerun := got["workflow_exec_id"]
		if w, err := st.GetWorkflow(context.Background(), rerun); err != nil || w.Source != "rerun of "+id+" from its failure (whimbrel web)" {
			t.Errorf("the rerun's execution: %+v, %v", w, err)
		}
		// Each page links to the other.
		if page := c.do("GET", p, nil, cookie(s)); !strings.Contains(page.body, `<dt>rerun as</dt><dd class="id"><a href="/workflows/`+url.PathEscape(rerun)+`">`) {
			t.Errorf("the cancelled execution's page does not link to its redrive %s:\n%s", rerun, page.body)
		}
		if page := c.do("GET", "/workflows/"+url.PathEscape(rerun), nil, cookie(s)); !strings.Contains(page.body, `<dt>rerun of</dt><dd class="id"><a href="`+p+`">`) {
			t.Errorf("the redrive's page does not link to the execution it reruns:\n%s", page.body)
		}
	})
	t.Run("a settled workflow is not cancelled", func(t *testing.T) {
		id := start(t, st, "name: one\nactivities:\n  a: {command: [sh, -c, 'true']}\n")
		claim(t, st, id, "a")
		finish(t, st, id, "a", 0, "")
		_, c := serve(t, Options{Store: st, AllowActions: true})
		if a := c.do("POST", "/api/workflows/"+url.PathEscape(id)+"/cancel", nil, bearer(testToken)); a.code != http.StatusConflict {
			t.Errorf("cancel a COMPLETED workflow: %d %s, want 409", a.code, a.body)
		}
	})
}

func TestNothingFromTheStoreIsRenderedUnescaped(t *testing.T) {
	st := sqliteStore(t)
	d, err := definition.Parse("x.yaml", []byte(diamond))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{Source: `<script>alert("source")</script>`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateActivity(context.Background(), key(id, "extract"), state.ActivityChange{
		From: []state.ActivityState{state.Ready}, To: state.Running, LaunchedAs: `<img src=x onerror=alert("launched")>`,
		Claim: &state.Claim{Owner: "owner-extract", Host: `<script>alert("host")</script>`, PID: 1},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := workflow.Cancel(context.Background(), st, id, `<script>alert("reason")</script>`, nil); err != nil {
		t.Fatal(err)
	}
	hostile := `<script>alert("stderr")</script><img src=x onerror=alert(1)>`
	if _, err := st.UpdateActivity(context.Background(), key(id, "extract"), state.ActivityChange{
		From: []state.ActivityState{state.CancelledRunning}, Owner: "owner-extract",
		Exit: &state.Exit{Code: 143, Signal: "SIGTERM"}, Error: hostile,
	}); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Options{Store: st})
	auth := bearer(testToken)
	for _, path := range []string{"/workflows/" + url.PathEscape(id), "/?since=all"} {
		page := c.do("GET", path, nil, auth)
		if page.code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, page.code)
		}
		if strings.Contains(page.body, "<script>alert") || strings.Contains(page.body, "<img src=x") {
			t.Errorf("GET %s renders a value from the store unescaped", path)
		}
	}
	page := c.do("GET", "/workflows/"+url.PathEscape(id), nil, auth)
	for _, want := range []string{"&lt;script&gt;alert(&#34;host&#34;)", "&lt;img src=x onerror=alert(&#34;launched&#34;)&gt;", "&lt;script&gt;alert(&#34;source&#34;)",
		"&lt;script&gt;alert(&#34;reason&#34;)", "143 (SIGTERM)"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if !strings.Contains(page.body, "&lt;script&gt;alert(&#34;stderr&#34;)&lt;/script&gt;") {
		t.Errorf("the stderr tail is not shown, escaped")
	}
	for _, evil := range []string{`<script>alert(1)</script>`, `"><svg onload=alert(1)>`, `x'onmouseover='alert(1)`} {
		for _, path := range []string{"/workflows/" + url.PathEscape(evil), "/fragments/workflows/" + url.PathEscape(evil), "/?workflow=" + url.QueryEscape(evil)} {
			a := c.do("GET", path, nil, auth)
			if strings.Contains(a.body, evil) {
				t.Errorf("GET %s renders the hostile value unescaped", path)
			}
		}
		a := c.do("GET", "/api/workflows/"+url.PathEscape(evil), nil, auth)
		if a.code != http.StatusNotFound || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
			t.Errorf("API with a hostile id: %d %s", a.code, a.header.Get("Content-Type"))
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	st := sqliteStore(t)
	_, c := serve(t, Options{Store: st})
	for _, path := range []string{"/", "/api/workflows", "/no/such"} {
		for _, setup := range []func(*http.Request){nil, bearer(testToken)} {
			a := c.do("GET", path, nil, setup)
			for h, want := range map[string]string{
				"X-Content-Type-Options": "nosniff",
				"X-Frame-Options":        "DENY",
				"Referrer-Policy":        "no-referrer",
			} {
				if got := a.header.Get(h); got != want {
					t.Errorf("GET %s: %s = %q, want %q", path, h, got, want)
				}
			}
			csp := a.header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
				}
			}
		}
	}
}

// slowStore never answers a read of a workflow until its context ends.
type slowStore struct{ Store }

func (slowStore) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestASlowStoreIsSaidNotWaitedFor(t *testing.T) {
	_, c := serve(t, Options{Store: slowStore{sqliteStore(t)}, StoreTimeout: 300 * time.Millisecond})
	began := time.Now()
	a := c.do("GET", "/workflows/"+url.PathEscape("diamond::00000000-0000-0000-0000-000000000001"), nil, bearer(testToken))
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the page took %s", took)
	}
	if a.code != http.StatusGatewayTimeout || !strings.Contains(a.body, "The store is slow") {
		t.Errorf("got %d, want 504 saying the store is slow:\n%s", a.code, a.body)
	}
	api := c.do("GET", "/api/workflows/"+url.PathEscape("diamond::00000000-0000-0000-0000-000000000001"), nil, bearer(testToken))
	if api.code != http.StatusGatewayTimeout {
		t.Errorf("API: %d, want 504", api.code)
	}
}

// brokenStore returns an item it cannot decode among the activities.
type brokenStore struct{ Store }

func (brokenStore) Activities(ctx context.Context, id string) ([]*state.ActivityExec, error) {
	return nil, &state.DecodeError{Table: "whimbrel_activity_exec", Key: "<b>x</b>", Attr: "state", Err: "not a string"}
}

func TestAnUndecodableItemShowsAsSuch(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, diamond)
	_, c := serve(t, Options{Store: brokenStore{st}})
	a := c.do("GET", "/workflows/"+url.PathEscape(id), nil, bearer(testToken))
	if a.code != http.StatusBadGateway || !strings.Contains(a.body, "cannot decode") || !strings.Contains(a.body, "&lt;b&gt;x&lt;/b&gt;") {
		t.Errorf("got %d, want 502 naming the item, escaped:\n%s", a.code, a.body)
	}
	if list := c.do("GET", "/", nil, bearer(testToken)); list.code != http.StatusOK || !strings.Contains(list.body, id) {
		t.Errorf("the listing fails too: %d", list.code)
	}
}

func TestNewAndCheckAddr(t *testing.T) {
	if _, err := New(Options{Store: sqliteStore(t), Token: "short"}); !errors.Is(err, ErrShortToken) {
		t.Errorf("New with a short token: %v, want ErrShortToken", err)
	}
	if _, err := New(Options{Token: testToken}); err == nil {
		t.Errorf("New without a store: no error")
	}
	for _, tc := range []struct {
		addr  string
		given bool
		ok    bool
	}{
		{"127.0.0.1:8080", false, true}, {"localhost:0", false, true}, {"[::1]:8080", false, true},
		{":8080", false, false}, {"0.0.0.0:8080", false, false}, {"192.168.1.2:80", false, false},
		{":8080", true, true}, {"0.0.0.0:8080", true, true}, {"nonsense", true, false},
	} {
		if err := CheckAddr(tc.addr, tc.given); (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %v) = %v, want ok=%v", tc.addr, tc.given, err, tc.ok)
		}
	}
	tok, err := NewToken()
	if err != nil || len(tok) < MinTokenLength {
		t.Errorf("NewToken: %q, %v", tok, err)
	}
	if u := URL(&net.TCPAddr{IP: net.IPv4zero, Port: 9}, "/", "a b"); u != "http://127.0.0.1:9/?token=a+b" {
		t.Errorf("URL: %s", u)
	}
}

func TestServeShutsDownWhenTold(t *testing.T) {
	s, err := New(Options{Store: sqliteStore(t), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Errorf("still serving after shutdown")
	}
}

func TestListingPages(t *testing.T) {
	st := sqliteStore(t)
	for range pageSize + 3 {
		start(t, st, "name: many\nactivities:\n  a: {command: [sh, -c, 'true']}\n")
	}
	_, c := serve(t, Options{Store: st})
	auth := bearer(testToken)
	first := c.do("GET", "/?workflow=many", nil, auth)
	if n := strings.Count(first.body, `<td class="id">`); n != pageSize {
		t.Errorf("the first page shows %d executions, want %d", n, pageSize)
	}
	if !strings.Contains(first.body, "older →") || strings.Contains(first.body, "← newer") {
		t.Errorf("the first page links to older ones only")
	}
	second := c.do("GET", "/?workflow=many&since=24h&page=1", nil, auth)
	if n := strings.Count(second.body, `<td class="id">`); n != 3 {
		t.Errorf("the second page shows %d executions, want 3", n)
	}
	if strings.Contains(second.body, "older →") || !strings.Contains(second.body, "← newer") {
		t.Errorf("the second page links to newer ones only")
	}
}

// TestTokenLinkRedirectsWithinThisSite: the redirect that drops ?token=
// goes to the path asked, as it was escaped, and never to another host
// (a path "//host/…" is not "//host").
func TestTokenLinkRedirectsWithinThisSite(t *testing.T) {
	s, err := New(Options{Store: sqliteStore(t), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for target, want := range map[string]string{
		"//evil.example/x?token=" + testToken:          "/evil.example/x",
		"///evil.example?token=" + testToken:           "/evil.example",
		"/workflows/a%2Fb?token=" + testToken + "&x=1": "/workflows/a%2Fb?x=1",
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		if got := w.Header().Get("Location"); w.Code != http.StatusSeeOther || got != want {
			t.Errorf("GET %s: %d to %q, want 303 to %q", strings.Split(target, "?")[0], w.Code, got, want)
		}
	}
}
