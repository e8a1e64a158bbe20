package web

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// etl is the workflow the browser watches: three sources, a fan-in, and a
// chain after it.
const etl = `name: nightly-etl
activities:
  extract-orders: {command: [sh, -c, "true"]}
  extract-customers: {command: [sh, -c, "true"]}
  extract-events: {command: [sh, -c, "true"]}
  clean-orders: {depends_on: [extract-orders], command: [sh, -c, "true"]}
  sessionize: {depends_on: [extract-events], command: [sh, -c, "true"]}
  join: {depends_on: [clean-orders, extract-customers], command: [sh, -c, "true"]}
  report: {depends_on: [join, sessionize], command: [sh, -c, "true"]}
  publish: {depends_on: [report], command: [sh, -c, "true"]}
`

// chromium finds Debian's chromium (WHIMBREL_CHROMIUM overrides). Without
// one the test is skipped on a developer's machine and fails under CI=true,
// where no test may pass by skipping.
func chromium(t *testing.T) string {
	t.Helper()
	names := []string{"chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("WHIMBREL_CHROMIUM"); p != "" {
		names = []string{p}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	msg := "no chromium found: apt-get install chromium (make test installs it), or set WHIMBREL_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium with a fresh profile.
func browser(t *testing.T) context.Context {
	t.Helper()
	actx, acancel := chromedp.NewExecAllocator(testbin.Context(t),
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(bcancel)
	return bctx
}

// within bounds the browser steps run with the returned context.
func within(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

func save(t *testing.T, name string, b []byte) {
	t.Helper()
	p := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatalf("save %s: %v", name, err)
	}
	t.Logf("screenshot: %s (%d bytes)", p, len(b))
	if dir := os.Getenv("WHIMBREL_SCREENSHOT_DIR"); dir != "" { // for the pictures in docs/
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatalf("save %s: %v", name, err)
		}
	}
}

func TestBrowserWatchesAWorkflowLive(t *testing.T) {
	ctx := browser(t)
	st := sqliteStore(t)
	id := start(t, st, etl)
	claim(t, st, id, "extract-orders")
	claim(t, st, id, "extract-customers")
	claim(t, st, id, "extract-events")
	finish(t, st, id, "extract-orders", 0, "")
	finish(t, st, id, "extract-customers", 0, "")
	claim(t, st, id, "clean-orders")

	s, err := New(Options{Store: st, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })

	// The address whimbrel web prints: the token, once.
	page := "/workflows/" + url.PathEscape(id)
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(ts.URL+page+"?token="+url.QueryEscape(testToken)),
		chromedp.WaitVisible(chromedp.CSS("svg.graph")),
	); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(loc); u.Path != page || u.RawQuery != "" {
		t.Errorf("the browser is at %s, want %s without the token", loc, page)
	}

	nodes := `Object.fromEntries([...document.querySelectorAll("svg.graph .node")].map(n => [n.dataset.activity, n.dataset.state]))`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](nodes))
	if err != nil {
		t.Fatalf("read the DAG: %v", err)
	}
	want := map[string]string{"extract-orders": "COMPLETED", "extract-customers": "COMPLETED", "extract-events": "RUNNING",
		"clean-orders": "RUNNING", "sessionize": "REQUESTED", "join": "REQUESTED", "report": "REQUESTED", "publish": "REQUESTED"}
	for name, state := range want {
		if got[name] != state {
			t.Errorf("node %s: %q, want %q (nodes: %v)", name, got[name], state, got)
		}
	}
	// Laid out left to right: every edge's upstream is left of its
	// downstream.
	xs, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](
		`Object.fromEntries([...document.querySelectorAll("svg.graph .node")].map(n => [n.dataset.activity, n.querySelector("rect").x.baseVal.value]))`))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range [][2]string{{"extract-orders", "clean-orders"}, {"clean-orders", "join"}, {"join", "report"}, {"sessionize", "report"}, {"report", "publish"}} {
		if xs[e[0]] >= xs[e[1]] {
			t.Errorf("%s (x=%v) is not left of %s (x=%v)", e[0], xs[e[0]], e[1], xs[e[1]])
		}
	}
	save(t, "workflow-running.png", screenshot(t, ctx))

	// While nothing changes, the page's polls are answered 304 Not Modified.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live-status").textContent.startsWith("live · checked")`,
		chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Errorf("the page never got a 304 for an unchanged workflow: %v", err)
	}

	// A marker that a reload would wipe out.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__whimbrelNoReload = true`)); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	finish(t, st, id, "clean-orders", 0, "")
	seen, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.querySelector('svg.graph .node[data-activity="clean-orders"]').dataset.state === "COMPLETED" &&
		 document.querySelector('svg.graph .node[data-activity="join"]').dataset.state === "READY" &&
		 document.querySelector('tr[data-activity="clean-orders"]').dataset.state === "COMPLETED"`,
		chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil || !seen {
		t.Fatalf("the page did not show clean-orders COMPLETED and join READY: %v", err)
	}
	latency := time.Since(changed)
	t.Logf("the change showed %s after the store's write", latency.Round(time.Millisecond))
	// The design's ~2 s is a budget, not a timed test: this bound only
	// catches a page that does not update by itself, on a loaded machine too.
	if latency > 10*time.Second {
		t.Errorf("the change took %s to show, want about 2 s", latency)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__whimbrelNoReload === true`))
	if err != nil || !kept {
		t.Errorf("the page was reloaded to show the change (%v)", err)
	}
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#live-status")))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live status: %q", status)

	// A failure, then the whole workflow settles: the page stops polling.
	claim(t, st, id, "join")
	finish(t, st, id, "join", 2, "Traceback (most recent call last):\n  File \"join.py\", line 12, in <module>\nKeyError: 'customer_id'\n")
	finish(t, st, id, "extract-events", 0, "")
	claim(t, st, id, "sessionize")
	finish(t, st, id, "sessionize", 0, "")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-final="true"]') !== null`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page did not show the workflow settled: %v", err)
	}
	save(t, "workflow-failed.png", screenshot(t, ctx))

	// Readable on a phone: nothing wider than the screen but the scrolling
	// DAG and table.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	over, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
	if err != nil || over {
		t.Errorf("on a phone-sized screen the page is wider than the screen (%v)", err)
	}
	save(t, "workflow-phone.png", screenshot(t, ctx))

	// The listing shows it, filtered by state.
	if err := chromedp.Do(within(t, ctx, 30*time.Second), chromedp.EmulateViewport(1280, 900), chromedp.Navigate(ts.URL+"/?state=FAILED&since=1h"),
		chromedp.WaitVisible(chromedp.CSS("table.list"))); err != nil {
		t.Fatalf("open the listing: %v", err)
	}
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("table.list td.id")].map(td => td.textContent)`))
	if err != nil || !slices.Contains(ids, id) {
		t.Errorf("the listing of FAILED executions shows %v, want %s (%v)", ids, id, err)
	}
	save(t, "listing.png", screenshot(t, ctx))
}

func screenshot(t *testing.T, ctx context.Context) []byte {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("the screenshot is not a PNG")
	}
	return b
}

// TestBrowserCancels: with actions allowed, the page's Cancel button works
// in a real browser (cookie, CSRF value, same-origin post, redirect), and
// the workflow is cancelled in the store.
func TestBrowserCancels(t *testing.T) {
	ctx := browser(t)
	st := sqliteStore(t)
	id := start(t, st, diamond)
	claim(t, st, id, "extract")
	s, err := New(Options{Store: st, Token: testToken, AllowActions: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() { ts.Close(); s.Close() })
	page := "/workflows/" + url.PathEscape(id)
	if err := chromedp.Do(within(t, ctx, time.Minute),
		chromedp.Navigate(ts.URL+page+"?token="+url.QueryEscape(testToken)),
		chromedp.WaitVisible(chromedp.CSS("button.danger")),
		chromedp.Click(chromedp.CSS("button.danger")),
		chromedp.WaitVisible(chromedp.CSS(".summary .badge.s-cancelled")),
	); err != nil {
		t.Fatalf("cancel from the page: %v", err)
	}
	w, err := st.GetWorkflow(context.Background(), id)
	if err != nil || w.State != "CANCELLED" {
		t.Fatalf("the workflow: %v %v, want CANCELLED", w, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('svg.graph .node[data-activity="extract"]').dataset.state`))
	if err != nil || got != "CANCELLED_RUNNING" {
		t.Errorf("extract is shown %q (%v), want CANCELLED_RUNNING", got, err)
	}
}
