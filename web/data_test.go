package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestPageShowsParamsOutputAndProgress: the execution's params, an
// activity's latest progress and its output are on the page, escaped, as
// commands wrote them.
func TestPageShowsParamsOutputAndProgress(t *testing.T) {
	st := sqliteStore(t)
	d, err := definition.Parse("x.yaml", []byte("name: data\nparams: {date: {required: true}}\nactivities:\n  a: {command: [\"true\"]}\n  b: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := workflow.Start(context.Background(), st, d, workflow.StartOptions{Params: map[string]string{"date": `<b>2024-01-31</b>`}})
	if err != nil {
		t.Fatal(err)
	}
	claim(t, st, id, "a")
	claim(t, st, id, "b")
	if _, err := st.UpdateActivity(context.Background(), key(id, "a"), state.ActivityChange{From: []state.ActivityState{state.Running},
		Owner: "owner-a", Beat: true, At: time.Now(), Progress: `<script>alert("progress")</script> half`}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateActivity(context.Background(), key(id, "b"), state.ActivityChange{From: []state.ActivityState{state.Running},
		Owner: "owner-b", To: state.Completed, Exit: &state.Exit{}, Output: `{"key":"<img src=x onerror=alert(1)>"}`}); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Options{Store: st})
	page := c.do("GET", "/workflows/"+url.PathEscape(id), nil, bearer(testToken))
	if page.code != http.StatusOK {
		t.Fatalf("GET: %d", page.code)
	}
	for _, want := range []string{"param date", "&lt;b&gt;2024-01-31&lt;/b&gt;", "progress:</strong> <code>&lt;script&gt;alert(&#34;progress&#34;)&lt;/script&gt; half</code>",
		`<pre class="output">{&#34;key&#34;:&#34;&lt;img src=x onerror=alert(1)&gt;&#34;}</pre>`} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "<script>alert") || strings.Contains(page.body, "<img src=x") || strings.Contains(page.body, "<b>2024") {
		t.Error("the page renders a command's data unescaped")
	}
}
