package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// flaky retries fetch up to 3 times, an hour apart.
const flaky = `name: flaky
activities:
  fetch: {command: [sh, -c, "true"], retry: {max_attempts: 3, interval: 1h, jitter: none}}
  load: {depends_on: [fetch], command: [sh, -c, "true"]}
`

// TestARetriedActivityShowsItsAttempts: the workflow page shows a retried
// activity's attempt as "n of max", when its next attempt may start, and
// each earlier attempt (state, exit, host, stderr tail, escaped); the DAG
// node carries the attempt count.
func TestARetriedActivityShowsItsAttempts(t *testing.T) {
	st := sqliteStore(t)
	id := start(t, st, flaky)
	claim(t, st, id, "fetch")
	finish(t, st, id, "fetch", 7, "line one\n<script>alert(1)</script> connection reset\n")
	_, c := serve(t, Options{Store: st})
	a := c.do("GET", "/workflows/"+id, nil, bearer(testToken))
	if a.code != http.StatusOK {
		t.Fatalf("GET the workflow: %d\n%s", a.code, a.body)
	}
	row := regexp.MustCompile(`(?s)<tr id="act-fetch".*?</tr>`).FindString(a.body)
	if !strings.Contains(row, `<td class="attempt">2 of 3</td>`) || !strings.Contains(row, `data-state="READY"`) {
		t.Errorf("the row of fetch does not show attempt 2 of 3, READY:\n%s", row)
	}
	for _, want := range []string{
		"next attempt at",
		`<tr class="s-failed" data-attempt="1" data-state="FAILED">`,
		"testhost pid 4242",
		"&lt;script&gt;alert(1)&lt;/script&gt; connection reset",
		`#2/3</text>`,
		"fetch: READY, attempt 2 of 3",
		"retry at ",
	} {
		if !strings.Contains(a.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(a.body, "<script>alert") {
		t.Error("an earlier attempt's stderr is rendered unescaped")
	}
	earlier := regexp.MustCompile(`(?s)data-attempt="1".*?</tr>`).FindString(a.body)
	if !strings.Contains(earlier, "<td>7</td>") {
		t.Errorf("the earlier attempt does not show its exit code 7:\n%s", earlier)
	}
	// An activity without a policy shows its attempt alone.
	load := regexp.MustCompile(`(?s)<tr id="act-load".*?</tr>`).FindString(a.body)
	if strings.Contains(load, " of ") {
		t.Errorf("an activity without a retry policy shows a maximum:\n%s", load)
	}
}
