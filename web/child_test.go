package web

import (
	"context"
	"net/url"
	"strings"
	"testing"

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
	d, err := definition.Parse("p.yaml", []byte("name: parent\nactivities:\n  run: {workflow: c.yaml}\n  hostile: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	child, err := definition.Parse("c.yaml", []byte("name: child\nactivities:\n  inner: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d.Activities["run"].Workflow.Definition = child
	id, _, err := workflow.Start(ctx, st, d, workflow.StartOptions{})
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
	childID, err := workflow.StartChild(ctx, st, wf, queued, nil)
	if err != nil {
		t.Fatal(err)
	}
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
