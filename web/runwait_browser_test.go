package web

import (
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserListSaysWhyARunWaits: of three starts of a workflow with
// max_active_runs 1, the list page shows the two that wait with the
// reason status gives, and none on the running one.
func TestBrowserListSaysWhyARunWaits(t *testing.T) {
	ctx := browser(t)
	st := sqliteStore(t)
	const def = "name: nightly\nconcurrency: {max_active_runs: 1}\nactivities:\n  a: {command: ['true']}\n"
	var ids []string
	for range 3 {
		ids = append(ids, start(t, st, def))
	}
	s, err := New(Options{Store: st, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(ts.URL+"/?token="+url.QueryEscape(testToken)),
		chromedp.WaitVisible(chromedp.CSS("table.list")),
	); err != nil {
		t.Fatalf("open the list: %v", err)
	}
	rows := `Object.fromEntries([...document.querySelectorAll("table.list tbody tr")].map(r => [r.querySelector("td.id").innerText.trim(), r.querySelector("td.why").innerText.trim()]))`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](rows))
	if err != nil {
		t.Fatal(err)
	}
	const why = "waiting: 1 of max_active_runs 1 running"
	if len(got) != 3 || got[ids[0]] != "" || got[ids[1]] != why || got[ids[2]] != why {
		t.Errorf("the list's why column: %q; want %q on the two runs that wait (%s, %s) and none on %s", got, why, ids[1], ids[2], ids[0])
	}
}
