package web

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// TestNotificationsShown: an execution's page shows its notifications:
// the one its receiver refused with its attempts and last error (what the
// receiver said, escaped), and none of the webhook's path.
func TestNotificationsShown(t *testing.T) {
	t.Parallel()
	st := sqliteStore(t)
	id := start(t, st, "name: told\nactivities:\n  a: {command: [\"true\"]}\nnotify:\n  - on: [failed]\n    webhook: {url: \"https://hooks.example.com/T0/secret-token\"}\n")
	claim(t, st, id, "a")
	finish(t, st, id, "a", 2, "boom")
	ns := st.(state.Notifications)
	n, err := ns.GetNotification(t.Context(), id, "failed/0")
	if err != nil {
		t.Fatal(err)
	}
	prev := n.Version
	n.Attempts, n.LastError, n.Due = 3, "webhook https://hooks.example.com/… answered 500: <script>x</script>", time.Now().Add(time.Minute)
	if err := ns.UpdateNotification(t.Context(), n, prev); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Options{Store: st})
	page := c.do("GET", "/workflows/"+url.PathEscape(id), nil, bearer(testToken))
	if page.code != http.StatusOK {
		t.Fatalf("GET: %d\n%s", page.code, page.body)
	}
	for _, want := range []string{"Notifications", "PENDING", "webhook hooks.example.com", "<td>3</td>", "answered 500: &lt;script&gt;x&lt;/script&gt;"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page.body, "secret-token") || strings.Contains(page.body, "<script>x") {
		t.Errorf("the page shows the webhook's path or raw markup")
	}
}
