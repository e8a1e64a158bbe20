package web

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestChildWorkflowPages: a parent's page expands its child workflow in
// place, with a link to it; the child's page names its parent. An owner
// another client wrote to look like a child's is shown escaped.
func TestChildWorkflowPages(t *testing.T) {
	st := sqliteStore(t)
	ctx := context.Background()
	id, childID := startWithChild(t, st)
	if _, err := st.UpdateActivity(ctx, key(id, "hostile"), state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
		Claim: &state.Claim{Owner: `child:<script>alert("child")</script>`}}); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Options{Store: st})
	auth := bearer(testToken)
	page := c.do("GET", "/workflows/"+url.PathEscape(id), nil, auth)
	for _, want := range []string{
		`<div class="child-workflow" data-child="` + childID + `">`,
		`<a class="id" href="/workflows/` + url.PathEscape(childID) + `">` + childID + `</a>`,
		`<tr data-activity="inner" data-state="READY">`,
		`&lt;script&gt;alert(&#34;child&#34;)&lt;/script&gt;`,
	} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the parent's page lacks %q", want)
		}
	}
	if strings.Contains(page.body, `<script>alert`) {
		t.Errorf("the parent's page renders an owner from the store unescaped")
	}
	page = c.do("GET", "/workflows/"+url.PathEscape(childID), nil, auth)
	if want := `<dt>child of</dt><dd class="id parent"><a href="/workflows/` + url.PathEscape(id) + `">` + id + `</a>, activity ` + key(id, "run").ActivityExecID; !strings.Contains(page.body, want) {
		t.Errorf("the child's page does not name its parent: lacks %q", want)
	}
}

// startWithChild starts a parent whose activity run runs a child
// workflow (one activity, inner), and starts the child as a launcher
// does; it returns both IDs.
func startWithChild(t *testing.T, st state.Store) (id, childID string) {
	t.Helper()
	ctx := context.Background()
	d, err := definition.Parse("p.yaml", []byte("name: parent\nactivities:\n  run: {workflow: c.yaml}\n  hostile: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	child, err := definition.Parse("c.yaml", []byte("name: child\nactivities:\n  inner: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d.Activities["run"].Workflow.Definition = child
	id, _, err = workflow.Start(ctx, st, d, workflow.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := st.UpdateActivity(ctx, key(id, "run"), state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Queued, Hold: "launcher:t"})
	if err != nil {
		t.Fatal(err)
	}
	wf, err := st.GetWorkflow(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if childID, err = workflow.StartChild(ctx, st, wf, queued, nil); err != nil {
		t.Fatal(err)
	}
	return id, childID
}

// TestBrowserFollowsAChild: in a real browser, the parent's page shows
// its child's activities in place and keeps them live; the link leads to
// the child's page, which links back to the parent.
func TestBrowserFollowsAChild(t *testing.T) {
	ctx := browser(t)
	st := sqliteStore(t)
	id, childID := startWithChild(t, st)
	s, err := New(Options{Store: st, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	inner := `.child-workflow tr[data-activity="inner"]`
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(ts.URL+"/workflows/"+url.PathEscape(id)+"?token="+url.QueryEscape(testToken)),
		chromedp.WaitVisible(chromedp.CSS(inner+`[data-state="READY"]`)),
	); err != nil {
		t.Fatalf("the child's activity on the parent's page: %v", err)
	}
	claim(t, st, childID, "inner")
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.WaitVisible(chromedp.CSS(inner+`[data-state="RUNNING"]`)),
		chromedp.Click(chromedp.CSS(`.child-workflow a.id`)),
		chromedp.WaitVisible(chromedp.CSS(`dd.parent a`)),
	); err != nil {
		t.Fatalf("follow the child: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('dd.parent a').getAttribute('href')`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/workflows/" + url.PathEscape(id); got != want {
		t.Errorf("the child's page links its parent as %q, want %q", got, want)
	}
}
