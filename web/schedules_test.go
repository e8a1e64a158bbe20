package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/state"
)

// TestScheduleAPI: GET /api/schedules lists the schedules with their last
// run's state (as whimbrel schedule list --json), GET
// /api/schedules/{name} gives one with its run log (as whimbrel schedule
// show --json); both need the token.
func TestScheduleAPI(t *testing.T) {
	st := sqliteStore(t).(schedule.Store)
	d, err := definition.Parse("test.yaml", []byte(diamond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-90 * time.Second).Truncate(time.Minute)
	if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "minutely", Definition: d, Every: time.Minute, Start: t0}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Tick(ctx, st, t0, nil); err != nil {
		t.Fatal(err)
	}
	_, c := serve(t, Options{Store: st})
	for _, path := range []string{"/api/schedules", "/api/schedules/minutely"} {
		if a := c.do("GET", path, nil, nil); a.code != http.StatusUnauthorized || strings.Contains(a.body, "minutely") {
			t.Errorf("GET %s without the token: %d, want 401", path, a.code)
		}
	}
	auth := bearer(testToken)

	list := c.do("GET", "/api/schedules", nil, auth)
	var got []struct {
		Name       string `json:"name"`
		Definition string `json:"definition"`
		Every      string `json:"every"`
		LastRun    *struct {
			RequestID      string `json:"request_id"`
			WorkflowExecID string `json:"workflow_exec_id"`
			State          string `json:"state"`
		} `json:"last_run"`
	}
	if err := json.Unmarshal([]byte(list.body), &got); list.code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/schedules: %d %v\n%s", list.code, err, list.body)
	}
	if len(got) != 1 || got[0].Name != "minutely" || got[0].Definition != "" || got[0].Every != "1m0s" || got[0].LastRun == nil ||
		got[0].LastRun.State != "RUNNING" || got[0].LastRun.RequestID != schedule.RequestID("minutely", t0) {
		t.Errorf("GET /api/schedules: %s", list.body)
	}
	if a := c.do("GET", "/api/schedules", nil, func(r *http.Request) {
		auth(r)
		r.Header.Set("If-None-Match", list.header.Get("ETag"))
	}); a.code != http.StatusNotModified {
		t.Errorf("GET /api/schedules with its ETag: %d, want 304", a.code)
	}

	one := c.do("GET", "/api/schedules/minutely", nil, auth)
	var show struct {
		Name string `json:"name"`
		Log  []struct {
			RequestID string `json:"request_id"`
			State     string `json:"state"`
		} `json:"run_log"`
	}
	if err := json.Unmarshal([]byte(one.body), &show); one.code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/schedules/minutely: %d %v\n%s", one.code, err, one.body)
	}
	if show.Name != "minutely" || len(show.Log) != 1 || show.Log[0].State != "RUNNING" || strings.Contains(one.body, `"definition"`) {
		t.Errorf("GET /api/schedules/minutely: %s", one.body)
	}
	if a := c.do("GET", "/api/schedules/none", nil, auth); a.code != http.StatusNotFound || !strings.Contains(a.body, `"error"`) {
		t.Errorf("GET /api/schedules/none: %d %s, want 404", a.code, a.body)
	}
}

// hostileSchedule is a schedule name schedule.Set accepts that would break
// out of an attribute and open a script if it were not escaped.
const hostileSchedule = `x"><script>alert(1)<`

// TestSchedulePages: /schedules lists each schedule's trigger, next and
// last fire, and its last run's ID, state and error; /schedules/{name}
// shows its run log, each run linked to its execution; both and their
// live fragments need the token, and nothing read from the store is
// rendered unescaped (a hostile name, a failed run's stderr).
func TestSchedulePages(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) state.Store
	}{{"sqlite", sqliteStore}, {"dynamodb", dynamoStore}} {
		t.Run(tc.name, func(t *testing.T) { testSchedulePages(t, tc.open(t).(schedule.Store)) })
	}
}

func testSchedulePages(t *testing.T, st schedule.Store) {
	d, err := definition.Parse("test.yaml", []byte(diamond+"params:\n  day: {default: sun}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-150 * time.Second).Truncate(time.Minute)
	if _, err := schedule.Set(ctx, st, schedule.Spec{Name: hostileSchedule, Definition: d, Every: time.Minute, Start: t0,
		Params: map[string]string{"day": "<b>mon</b>"}}, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "nightly", Definition: d, Cron: "0 2 * * *", TimeZone: "Europe/Paris", Start: t0}, t0); err != nil {
		t.Fatal(err)
	}
	if err := schedule.Pause(ctx, st, "nightly"); err != nil {
		t.Fatal(err)
	}
	if _, err := schedule.Tick(ctx, st, t0, nil); err != nil {
		t.Fatal(err)
	}
	sc, err := st.GetSchedule(ctx, hostileSchedule)
	if err != nil || len(sc.Runs) != 1 || sc.Runs[0].WorkflowExecID == "" {
		t.Fatalf("the first fire: %+v %v", sc, err)
	}
	first := sc.Runs[0].WorkflowExecID
	// The first run fails with a hostile stderr; the next fire starts a
	// second run.
	claim(t, st, first, "extract")
	finish(t, st, first, "extract", 3, "warming up\n<script>alert('stderr')</script>\n")
	if _, err := schedule.Tick(ctx, st, t0.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if sc, err = st.GetSchedule(ctx, hostileSchedule); err != nil || len(sc.Runs) != 2 {
		t.Fatalf("the second fire: %+v %v", sc, err)
	}
	second := sc.Runs[0].WorkflowExecID

	_, c := serve(t, Options{Store: st})
	named := "/schedules/" + url.PathEscape(hostileSchedule)
	for _, path := range []string{"/schedules", named, "/fragments/schedules", "/fragments" + named} {
		if a := c.do("GET", path, nil, nil); a.code != http.StatusUnauthorized || strings.Contains(a.body, "alert(1)") || strings.Contains(a.body, first) {
			t.Errorf("GET %s without the token: %d, want 401", path, a.code)
		}
	}
	auth := bearer(testToken)
	noScript := func(what, body string) {
		t.Helper()
		if strings.Contains(body, "<script>") || strings.Contains(body, "<b>mon") {
			t.Errorf("%s renders data from the store unescaped:\n%s", what, body)
		}
	}

	list := c.do("GET", "/schedules", nil, auth)
	if list.code != http.StatusOK {
		t.Fatalf("GET /schedules: %d\n%s", list.code, list.body)
	}
	noScript("GET /schedules", list.body)
	for _, want := range []string{
		`href="/schedules"`, // the nav
		`href="` + named + `"`,
		"x&#34;&gt;&lt;script&gt;alert(1)&lt;",
		"every 1m0s",
		"cron 0 2 * * * (Europe/Paris)",
		"paused",
		`href="/workflows/` + url.PathEscape(second) + `"`,
		"RUNNING",
		clockOf(t0.Add(time.Minute)),
		clockOf(t0.Add(2 * time.Minute)), // the next fire
		`data-src="/fragments/schedules"`,
	} {
		if !strings.Contains(list.body, want) {
			t.Errorf("GET /schedules lacks %q", want)
		}
	}
	if frag := c.do("GET", "/fragments/schedules", nil, auth); frag.code != http.StatusOK || strings.Contains(frag.body, "<html") ||
		!strings.Contains(frag.body, url.PathEscape(second)) {
		t.Errorf("GET /fragments/schedules: %d, want the live part only", frag.code)
	}

	one := c.do("GET", named, nil, auth)
	if one.code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", named, one.code, one.body)
	}
	noScript("GET "+named, one.body)
	for _, want := range []string{
		`href="/workflows/` + url.PathEscape(first) + `"`,
		`href="/workflows/` + url.PathEscape(second) + `"`,
		`data-state="FAILED"`,
		`data-state="RUNNING"`,
		"extract FAILED (exit 3): warming up | &lt;script&gt;alert(&#39;stderr&#39;)&lt;/script&gt;",
		"&lt;b&gt;mon&lt;/b&gt;", // the param
		`data-src="/fragments/schedules/` + url.PathEscape(hostileSchedule) + `"`,
	} {
		if !strings.Contains(one.body, want) {
			t.Errorf("GET %s lacks %q", named, want)
		}
	}
	if frag := c.do("GET", "/fragments"+named, nil, auth); frag.code != http.StatusOK || strings.Contains(frag.body, "<html") ||
		!strings.Contains(frag.body, url.PathEscape(first)) {
		t.Errorf("GET /fragments%s: %d, want the live part only", named, frag.code)
	} else if again := c.do("GET", "/fragments"+named, nil, func(r *http.Request) {
		auth(r)
		r.Header.Set("If-None-Match", frag.header.Get("ETag"))
	}); again.code != http.StatusNotModified {
		t.Errorf("GET /fragments%s with its ETag: %d, want 304", named, again.code)
	}
	// A scheduled run's page shows its schedule, fire time and params.
	run := c.do("GET", "/workflows/"+url.PathEscape(first), nil, auth)
	noScript("the first run's page", run.body)
	for _, want := range []string{
		`<dt>schedule</dt><dd><a href="` + named + `">x&#34;&gt;&lt;script&gt;alert(1)&lt;</a></dd>`,
		`<dt>fire time (UTC)</dt><dd class="time">` + clockOf(t0) + `</dd>`,
		`<dt>param day</dt><dd>&lt;b&gt;mon&lt;/b&gt;</dd>`,
	} {
		if !strings.Contains(run.body, want) {
			t.Errorf("the first run's page lacks %q", want)
		}
	}
	// One started otherwise has none.
	other := start(t, st, diamond)
	if a := c.do("GET", "/workflows/"+url.PathEscape(other), nil, auth); a.code != http.StatusOK || strings.Contains(a.body, `class="facts params"`) {
		t.Errorf("an execution without params: %d, and it shows a params list", a.code)
	}
	if a := c.do("GET", "/schedules/none", nil, auth); a.code != http.StatusNotFound {
		t.Errorf("GET /schedules/none: %d, want 404", a.code)
	}
}

// TestSchedulePagesOnAStoreWithoutSchedules: a store that keeps no
// schedules says so rather than failing.
func TestSchedulePagesOnAStoreWithoutSchedules(t *testing.T) {
	_, c := serve(t, Options{Store: struct{ Store }{sqliteStore(t)}})
	auth := bearer(testToken)
	if a := c.do("GET", "/schedules", nil, auth); a.code != http.StatusOK || !strings.Contains(a.body, "keeps no schedules") {
		t.Errorf("GET /schedules: %d\n%s", a.code, a.body)
	}
	if a := c.do("GET", "/schedules/x", nil, auth); a.code != http.StatusNotFound || !strings.Contains(a.body, "keeps no schedules") {
		t.Errorf("GET /schedules/x: %d\n%s", a.code, a.body)
	}
	if a := c.do("GET", "/api/schedules", nil, auth); a.code != http.StatusNotFound {
		t.Errorf("GET /api/schedules: %d, want 404", a.code)
	}
}

func clockOf(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// badRunStore cannot decode the execution bad.
type badRunStore struct {
	schedule.Store
	bad string
}

func (b badRunStore) GetWorkflow(ctx context.Context, id string) (*state.WorkflowExec, error) {
	if id == b.bad {
		return nil, &state.DecodeError{Table: "whimbrel_workflow_exec", Key: "<i>" + id + "</i>", Attr: "state", Err: "not a string"}
	}
	return b.Store.GetWorkflow(ctx, id)
}

// TestAnUndecodableRunShowsAsSuch: a run whose execution cannot be
// decoded is named, escaped, on the schedules pages, which still show the
// rest.
func TestAnUndecodableRunShowsAsSuch(t *testing.T) {
	st := sqliteStore(t).(schedule.Store)
	d, err := definition.Parse("test.yaml", []byte(diamond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-150 * time.Second).Truncate(time.Minute)
	if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "minutely", Definition: d, Every: time.Minute, Start: t0}, t0); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{t0, t0.Add(time.Minute)} {
		if _, err := schedule.Tick(ctx, st, at, nil); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := st.GetSchedule(ctx, "minutely")
	if err != nil || len(sc.Runs) != 2 {
		t.Fatalf("the schedule: %+v %v", sc, err)
	}
	bad, good := sc.Runs[0].WorkflowExecID, sc.Runs[1].WorkflowExecID
	_, c := serve(t, Options{Store: badRunStore{Store: st, bad: bad}})
	auth := bearer(testToken)
	for _, path := range []string{"/schedules", "/schedules/minutely"} {
		a := c.do("GET", path, nil, auth)
		if a.code != http.StatusOK || !strings.Contains(a.body, "unreadable") || !strings.Contains(a.body, "cannot be read: ") || !strings.Contains(a.body, "malformed item") ||
			!strings.Contains(a.body, "&lt;i&gt;") || strings.Contains(a.body, "<i>") {
			t.Errorf("GET %s: %d, want 200 naming the undecodable run, escaped:\n%s", path, a.code, a.body)
		}
	}
	if a := c.do("GET", "/schedules/minutely", nil, auth); !strings.Contains(a.body, `data-state="RUNNING"`) || !strings.Contains(a.body, url.PathEscape(good)) {
		t.Errorf("the run log does not show the readable run %s RUNNING", good)
	}
}

// TestScheduleFireThatFailedToStart: a fire whose run failed to start
// shows in the listing's last error, on the schedule's page (its line in
// the run log, the last error, when it is tried again) and in the API,
// with the error and the number of tries, escaped.
func TestScheduleFireThatFailedToStart(t *testing.T) {
	st := sqliteStore(t).(schedule.Store)
	d, err := definition.Parse("test.yaml", []byte(diamond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now().Add(-90 * time.Second).Truncate(time.Minute)
	if _, err := schedule.Set(ctx, st, schedule.Spec{Name: "broken", Definition: d, Every: time.Minute, Start: t0}, t0); err != nil {
		t.Fatal(err)
	}
	// A definition no Whimbrel can read, as a foreign writer may leave it.
	sc, err := st.GetSchedule(ctx, "broken")
	if err != nil {
		t.Fatal(err)
	}
	prev := sc.Version
	sc.Definition = `{"name": "<script>x</script>`
	if err := st.PutSchedule(ctx, sc, prev, ""); err != nil {
		t.Fatal(err)
	}
	var fe *schedule.FireError
	if _, err := schedule.Tick(ctx, st, t0, nil); !errors.As(err, &fe) {
		t.Fatalf("tick: %v, want a fire that failed to start", err)
	}
	_, c := serve(t, Options{Store: st})
	auth := bearer(testToken)
	noScript := func(what, body string) {
		t.Helper()
		if strings.Contains(body, "<script>x") {
			t.Errorf("%s renders the error unescaped:\n%s", what, body)
		}
	}
	retry := clockOf(t0.Add(schedule.RetryFirst))
	list := c.do("GET", "/schedules", nil, auth)
	noScript("the schedules page", list.body)
	if !strings.Contains(list.body, "failed to start (1 try; next try at") || !strings.Contains(list.body, "retrying the fire time "+clockOf(t0)+", next try "+retry) {
		t.Errorf("the schedules page does not show the failed fire:\n%s", list.body)
	}
	one := c.do("GET", "/schedules/broken", nil, auth)
	noScript("the schedule's page", one.body)
	for _, want := range []string{`data-state="not started"`, `<dt>last error</dt>`, "failed to start (1 try; next try at"} {
		if !strings.Contains(one.body, want) {
			t.Errorf("the schedule's page lacks %q", want)
		}
	}
	api := c.do("GET", "/api/schedules/broken", nil, auth)
	var got struct {
		LastError string `json:"last_error"`
		Failing   *struct {
			Tries      int    `json:"tries"`
			StartError string `json:"start_error"`
		} `json:"failing"`
		Log []struct {
			StartError string `json:"start_error"`
			Tries      int    `json:"tries"`
			RetryAt    string `json:"retry_at"`
		} `json:"run_log"`
	}
	if err := json.Unmarshal([]byte(api.body), &got); err != nil || got.LastError == "" || got.Failing == nil || got.Failing.Tries != 1 ||
		len(got.Log) != 1 || got.Log[0].StartError == "" || got.Log[0].Tries != 1 || got.Log[0].RetryAt == "" {
		t.Errorf("GET /api/schedules/broken: %v\n%s", err, api.body)
	}
	if l := c.do("GET", "/api/schedules", nil, auth); !strings.Contains(l.body, `"last_error": "failed to start (1 try; next try at`) {
		t.Errorf("GET /api/schedules lacks the last error:\n%s", l.body)
	}
}
