package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestMapIsOneNodeWithItsElementsPaged: a for_each map is one node of
// the DAG with its counts and a progress bar, and its elements are listed
// on a page of their own, 50 a page, filtered by state, with hostile
// stderr escaped.
func TestMapIsOneNodeWithItsElementsPaged(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, "name: m\nactivities:\n  convert: {for_each: {count: 120}, tolerated_failures: 5, command: [\"true\"]}\n")
	ctx := context.Background()
	// Element 5 fails with a hostile stderr; elements 0..9 complete otherwise.
	for i := 0; i < 10; i++ {
		k := state.ActivityKey{ActivityExecID: state.ItemExecIDFor(id, "convert", i), WorkflowExecID: id}
		owner := "o"
		if _, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Ready}, To: state.Running,
			Claim: &state.Claim{Owner: owner}}); err != nil {
			t.Fatal(err)
		}
		to, code := state.Completed, 0
		if i == 5 {
			to, code = state.Failed, 2
		}
		a, err := st.UpdateActivity(ctx, k, state.ActivityChange{From: []state.ActivityState{state.Running}, To: to, Owner: owner,
			Exit: &state.Exit{Code: code}, Error: "<script>alert(1)</script>"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := workflow.Advance(ctx, st, a, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, c := serve(t, Options{Store: st})
	page := c.do("GET", "/workflows/"+url.PathEscape(id), nil, bearer(testToken))
	if page.code != http.StatusOK {
		t.Fatalf("GET the workflow: %d", page.code)
	}
	if n := strings.Count(page.body, `class="node `); n != 1 {
		t.Errorf("the DAG has %d nodes, want the map as one", n)
	}
	for _, want := range []string{"▶ 9/120 completed", `class="map-bar"`, `<progress max="120" value="9">`, "/items?activity=convert"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the workflow page lacks %q", want)
		}
	}
	items := c.do("GET", "/workflows/"+url.PathEscape(id)+"/items?activity=convert&page=2", nil, bearer(testToken))
	if items.code != http.StatusOK || !strings.Contains(items.body, "convert[50]") || strings.Contains(items.body, "convert[49]<") ||
		!strings.Contains(items.body, `rel="prev"`) || !strings.Contains(items.body, `rel="next"`) {
		t.Errorf("page 2 of the elements: %d\n%s", items.code, items.body)
	}
	failed := c.do("GET", "/workflows/"+url.PathEscape(id)+"/items?state=FAILED", nil, bearer(testToken))
	if !strings.Contains(failed.body, "convert[5]") || strings.Contains(failed.body, "convert[4]") || strings.Contains(failed.body, "<script>alert") ||
		!strings.Contains(failed.body, "&lt;script&gt;") {
		t.Errorf("the failed elements: %d\n%s", failed.code, failed.body)
	}
	if bad := c.do("GET", "/workflows/"+url.PathEscape(id)+"/items?state=nope", nil, bearer(testToken)); bad.code != http.StatusBadRequest {
		t.Errorf("a bad state: %d, want 400", bad.code)
	}
}
