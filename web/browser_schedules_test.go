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
	"github.com/whimbrel/whimbrel/schedule"
)

// TestBrowserSchedulesAndAttempts: in a real browser, the nav leads to
// the schedules; a schedule's page shows its run log and a new fire
// appears in it without a reload; a run links to its execution, whose
// page shows the schedule's params; a retried activity's page shows its
// attempt out of the maximum and its earlier attempts.
func TestBrowserSchedulesAndAttempts(t *testing.T) {
	ctx := browser(t)
	st := sqliteStore(t).(schedule.Store)
	d, err := definition.Parse("test.yaml", []byte(diamond+"params:\n  region: {default: eu}\n"))
	if err != nil {
		t.Fatal(err)
	}
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	if _, err := schedule.Set(bg, st, schedule.Spec{Name: "etl-every-minute", Definition: d, Every: time.Minute, Start: t0,
		Catchup: schedule.CatchupLatest, Params: map[string]string{"region": "eu-west-1"}}, t0); err != nil {
		t.Fatal(err)
	}
	tick := func(at time.Time) string {
		t.Helper()
		if _, err := schedule.Tick(bg, st, at, nil); err != nil {
			t.Fatal(err)
		}
		sc, err := st.GetSchedule(bg, "etl-every-minute")
		if err != nil || len(sc.Runs) == 0 {
			t.Fatalf("the schedule after a tick: %+v %v", sc, err)
		}
		return sc.Runs[0].WorkflowExecID
	}
	first := tick(t0)
	claim(t, st, first, "extract")
	finish(t, st, first, "extract", 1, "psql: error: connection to server failed\n")
	tick(t0.Add(time.Minute))
	retried := start(t, st, flaky)
	claim(t, st, retried, "fetch")
	finish(t, st, retried, "fetch", 75, "curl: (28) Operation timed out after 30001 milliseconds\n")

	s, err := New(Options{Store: st, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })

	// From the listing, the nav leads to the schedules.
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(ts.URL+"/?token="+url.QueryEscape(testToken)),
		chromedp.WaitVisible(chromedp.CSS(`nav a[href="/schedules"]`)),
		chromedp.Click(chromedp.CSS(`nav a[href="/schedules"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.schedules tr[data-schedule="etl-every-minute"]`)),
	); err != nil {
		t.Fatalf("open the schedules: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-schedule="etl-every-minute"]`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"every 1m0s", "RUNNING", "diamond"} {
		if !contains(row, want) {
			t.Errorf("the schedule's row %q lacks %q", row, want)
		}
	}
	save(t, "schedules.png", screenshot(t, ctx))

	if err := chromedp.Do(within(t, ctx, 30*time.Second),
		chromedp.Click(chromedp.CSS(`tr[data-schedule="etl-every-minute"] td.id a`)),
		chromedp.WaitVisible(chromedp.CSS(`.runlog table`)),
	); err != nil {
		t.Fatalf("open the schedule: %v", err)
	}
	states := `[...document.querySelectorAll(".runlog tbody tr")].map(r => r.dataset.state)`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](states))
	if err != nil || len(got) != 2 || got[0] != "RUNNING" || got[1] != "FAILED" {
		t.Errorf("the run log shows %v (%v), want [RUNNING FAILED]", got, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__whimbrelNoReload = true`)); err != nil {
		t.Fatal(err)
	}
	tick(t0.Add(2 * time.Minute))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll(".runlog tbody tr").length === 3`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("the new fire never showed in the run log: %v", err)
	}
	if kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__whimbrelNoReload === true`)); err != nil || !kept {
		t.Errorf("the page was reloaded to show the new fire (%v)", err)
	}
	save(t, "schedule.png", screenshot(t, ctx))
	phone(t, ctx, "schedule-phone.png")

	// The failed run's page, from the run log, shows the params.
	if err := chromedp.Do(within(t, ctx, 30*time.Second),
		chromedp.Click(chromedp.CSS(`.runlog tr[data-state="FAILED"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`.facts.params`)),
	); err != nil {
		t.Fatalf("open the failed run: %v", err)
	}
	params, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.facts.params`)))
	if err != nil || !contains(strings.ToLower(params), "param region") || !contains(params, "eu-west-1") || !contains(params, "etl-every-minute") {
		t.Errorf("the run's params read %q (%v)", params, err)
	}

	// A retried activity: attempt 2 of 3, waiting, after attempt 1 failed.
	if err := chromedp.Do(within(t, ctx, 30*time.Second),
		chromedp.Navigate(ts.URL+"/workflows/"+url.PathEscape(retried)),
		chromedp.WaitVisible(chromedp.CSS(`table.attempts`)),
	); err != nil {
		t.Fatalf("open the retried workflow: %v", err)
	}
	attempt, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-activity="fetch"] td.attempt`)))
	if err != nil || attempt != "2 of 3" {
		t.Errorf("fetch's attempt reads %q (%v), want 2 of 3", attempt, err)
	}
	earlier, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`table.attempts tr[data-attempt="1"]`)))
	if err != nil || !contains(earlier, "FAILED") || !contains(earlier, "75") || !contains(earlier, "Operation timed out") {
		t.Errorf("the earlier attempt reads %q (%v)", earlier, err)
	}
	node, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('svg.graph .node[data-activity="fetch"] text.attempt').textContent`))
	if err != nil || node != "#2/3" {
		t.Errorf("fetch's node shows %q (%v), want #2/3", node, err)
	}
	save(t, "workflow-retry.png", screenshot(t, ctx))
	phone(t, ctx, "workflow-retry-phone.png")
}

// phone checks that the open page is no wider than a phone's screen (only
// its DAG and tables scroll sideways) and that the error column of the
// tables stays shown, then goes back to a laptop's screen.
func phone(t *testing.T, ctx context.Context, shot string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	over, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || over {
		t.Errorf("%s: on a phone-sized screen the page is wider than the screen (%v)", shot, err)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[int](
		`[...document.querySelectorAll(".runlog td.why, table.attempts td")].filter(td => getComputedStyle(td).display === "none").length`))
	if err != nil || hidden != 0 {
		t.Errorf("%s: %d cells of the run log or earlier attempts are hidden on a phone (%v)", shot, hidden, err)
	}
	save(t, shot, screenshot(t, ctx))
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
