package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// branchy skips one branch, cancels a handler by its rule, and has a
// finally activity; a hostile activity name is shown escaped.
const branchy = `name: branchy
activities:
  check: {command: [sh, -c, "true"]}
  skipped: {depends_on: [check], when: "false", command: [sh, -c, "true"]}
  page: {depends_on: [check], trigger_rule: one_failed, command: [sh, -c, "true"]}
finally:
  cleanup: {command: [sh, -c, "true"]}
`

// TestControlFlowShownDistinctly: the workflow page shows a skipped
// activity as SKIPPED (its own look, with why), one cancelled by its rule
// as CANCELLED (rule), and a finally activity marked as such; the
// workflow says who decided its outcome and which finally failed.
func TestControlFlowShownDistinctly(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, branchy)
	claim(t, st, id, "check")
	finish(t, st, id, "check", 0, "")
	claim(t, st, id, "cleanup")
	finish(t, st, id, "cleanup", 3, "<script>x</script>")
	_, c := serve(t, Options{Store: st})
	a := c.do("GET", "/workflows/"+id, nil, bearer(testToken))
	if a.code != http.StatusOK {
		t.Fatalf("GET the workflow: %d\n%s", a.code, a.body)
	}
	row := func(name string) string {
		return regexp.MustCompile(`(?s)<tr id="act-` + name + `".*?</tr>`).FindString(a.body)
	}
	if r := row("skipped"); !strings.Contains(r, `data-shown="SKIPPED"`) || !strings.Contains(r, `class="s-skipped"`) || !strings.Contains(r, "SKIPPED</span>") {
		t.Errorf("the skipped activity's row:\n%s", r)
	}
	if !strings.Contains(a.body, `skipped: when &#34;false&#34; is false`) {
		t.Error("the page does not say why the activity was skipped")
	}
	if r := row("page"); !strings.Contains(r, `data-shown="CANCELLED (rule)"`) || !strings.Contains(r, `s-cancelled`) {
		t.Errorf("the rule-cancelled activity's row:\n%s", r)
	}
	if r := row("cleanup"); !strings.Contains(r, `data-shown="FAILED (finally)"`) {
		t.Errorf("the finally activity's row:\n%s", r)
	}
	for _, want := range []string{"finally failed", "cleanup FAILED"} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(a.body, "<script>x") {
		t.Error("stderr rendered unescaped")
	}
}
