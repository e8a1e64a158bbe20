package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/schedule"
	"github.com/whimbrel/whimbrel/workflow"
)

// TestScheduleAPI: GET /api/schedules lists the schedules with their last
// run's state (as whimbrel schedule list --json), GET
// /api/schedules/{name} gives one with its run log (as whimbrel schedule
// show --json); both need the token.
func TestScheduleAPI(t *testing.T) {
	st := sqliteStore(t).(schedule.Store)
	d, err := workflow.Parse("test.yaml", []byte(diamond))
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
		Every      int64  `json:"every"`
		LastRun    *struct {
			RequestID      string `json:"request_id"`
			WorkflowExecID string `json:"workflow_exec_id"`
			State          string `json:"state"`
		} `json:"last_run"`
	}
	if err := json.Unmarshal([]byte(list.body), &got); list.code != http.StatusOK || err != nil {
		t.Fatalf("GET /api/schedules: %d %v\n%s", list.code, err, list.body)
	}
	if len(got) != 1 || got[0].Name != "minutely" || got[0].Definition != "" || got[0].LastRun == nil ||
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
