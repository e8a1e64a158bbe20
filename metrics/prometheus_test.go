//go:build linux

package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

var bin string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		bin = dir
		return m.Run()
	}, nil, map[string]string{"whimbrel": "../cmd/whimbrel", "whimbrel-launcher": "../cmd/whimbrel-launcher",
		"whimbrel-monitor": "../cmd/whimbrel-monitor", "whimbrel-run": "../cmd/whimbrel-run"})
}

// tool finds one of Prometheus's binaries (Debian's prometheus package):
// on a developer's machine without it the test is skipped; under CI=true
// it fails, as no test may pass by skipping.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := name + " is not installed: `make prometheus-install` (Debian's prometheus package)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// start runs a process until the test ends, then stops it with SIGTERM
// (SIGKILL after 20 s) and waits for it.
func start(t *testing.T, env []string, out *testbin.Buffer, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

const failing = `name: x
activities:
  a: {command: [sh, -c, "exit 3"]}
  b: {command: [sh, -c, "exit 3"]}
  c: {command: [sh, -c, "exit 3"]}
`

const slow = `name: slow
activities:
  nap: {command: [sleep, "300"]}
`

// TestPrometheusScrapes runs a real Prometheus that scrapes a launcher, a
// monitor and whimbrel web while workflows run on DynamoDB Local, and
// finds in its answers what happened: workflow x's three activities
// failed, x failed once, slow's activity is RUNNING; and promtool passes
// each /metrics.
func TestPrometheusScrapes(t *testing.T) {
	prom, promtool := tool(t, "prometheus"), tool(t, "promtool")
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	dir := t.TempDir()
	token := "metrics-test-token-0123456789"
	monAddr, lnAddr, webAddr, promAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	mon2Addr, ln2Addr := freeAddr(t), freeAddr(t)
	var logs testbin.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("processes' output:\n%s", logs.String())
		}
	})
	// Two of each: an ending is counted once however many run.
	for _, addr := range []string{monAddr, mon2Addr} {
		start(t, env, &logs, filepath.Join(bin, "whimbrel-monitor"), "--interval", "1s", "--metrics-addr", addr)
	}
	for _, addr := range []string{lnAddr, ln2Addr} {
		start(t, env, &logs, filepath.Join(bin, "whimbrel-launcher"), "--interval", "1s", "--metrics-addr", addr,
			"--wrapper", filepath.Join(bin, "whimbrel-run"), "--types", "local", "--log-dir", filepath.Join(dir, "logs"))
	}
	start(t, append(env, "WHIMBREL_WEB_TOKEN="+token), &logs, filepath.Join(bin, "whimbrel"), "web", "--addr", webAddr)
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: monitor
    static_configs: [{targets: [%q, %q]}]
  - job_name: launcher
    static_configs: [{targets: [%q, %q]}]
  - job_name: web
    authorization: {credentials_file: %q}
    static_configs: [{targets: [%q]}]
`, monAddr, mon2Addr, lnAddr, ln2Addr, filepath.Join(dir, "token"), webAddr)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, nil, &logs, prom, "--config.file", filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path", filepath.Join(dir, "tsdb"), "--web.listen-address", promAddr)

	for name, def := range map[string]string{"x": failing, "slow": slow} {
		f := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(f, []byte(def), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bin, "whimbrel"), "start", f)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("whimbrel start %s: %v\n%s", name, err, out)
		}
	}

	// The web view reads the store when asked: ask it once, with the
	// token, so that its store calls show.
	_ = get(t, webAddr, "/api/workflows", token)

	// Each query's value must come to what happened, within a generous
	// bound: the machine is shared.
	for q, want := range map[string]float64{
		`sum(whimbrel_activities_ended_total{workflow="x",outcome="failed"})`:                                                      3,
		`sum(whimbrel_workflows_ended_total{workflow="x",outcome="failed"})`:                                                       1,
		`sum(whimbrel_activity_duration_seconds_count{workflow="x",outcome="failed"})`:                                             3,
		`max(whimbrel_activities{workflow="slow",state="RUNNING"})`:                                                                1,
		`max(whimbrel_workflows{workflow="slow",state="RUNNING"})`:                                                                 1,
		`sum(whimbrel_launches_total{workflow="x",launch_type="local"})`:                                                           3,
		`count(max by (job) (up{job=~"monitor|launcher|web"} == 1))`:                                                               3,
		`count(sum by (job) (whimbrel_store_calls_total{operation="Query",code="OK"}) > 0)`:                                        3,
		`clamp_max(sum(whimbrel_store_capacity_units_total{job="monitor"}), 1)`:                                                    1,
		`clamp_max(sum(whimbrel_monitor_sweeps_total{outcome="ok"}), 1)`:                                                           1,
		`count(max by (workflow) (whimbrel_oldest_heartbeat_seconds{workflow="slow"}) >= 0)`:                                       1,
		`sum(whimbrel_activities_ended_total{workflow="x"}) - sum(whimbrel_activities_ended_total{outcome="failed",workflow="x"})`: 0,
	} {
		waitFor(t, promAddr, q, want)
	}
	// And they stay so: nobody counts an ending again later.
	time.Sleep(5 * time.Second)
	for q, want := range map[string]float64{
		`sum(whimbrel_activities_ended_total{workflow="x"})`: 3,
		`sum(whimbrel_workflows_ended_total{workflow="x"})`:  1,
	} {
		waitFor(t, promAddr, q, want)
	}

	// promtool's own checks of each exposition, the web's behind its token.
	for _, target := range []struct{ addr, token string }{{monAddr, ""}, {lnAddr, ""}, {webAddr, token}} {
		body := get(t, target.addr, "/metrics", target.token)
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s: %v\n%s", target.addr, err, out)
		}
	}
	// Without the token, the web's metrics are refused.
	resp, err := http.Get("http://" + webAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %s, want 401", resp.Status)
	}
}

// get answers a GET of path at addr, asked until it answers 200 or a
// minute has passed (a process may still be starting).
func get(t *testing.T, addr, path, token string) []byte {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := tryGet(addr, path, token)
		if err == nil {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s%s: %v", addr, path, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tryGet(addr, path, token string) ([]byte, error) {
	req, err := http.NewRequest("GET", "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, b)
	}
	return b, err
}

// waitFor asks Prometheus's HTTP API for q until it answers want, for at
// most two minutes.
func waitFor(t *testing.T, promAddr, q string, want float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	last := "no answer"
	for ctx.Err() == nil {
		got, ok, err := query(ctx, promAddr, q)
		switch {
		case err != nil:
			last = err.Error()
		case !ok:
			last = "no series"
		case got == want:
			return
		default:
			last = strconv.FormatFloat(got, 'g', -1, 64)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	t.Errorf("Prometheus: %s is %s, want %g", q, last, want)
}

func query(ctx context.Context, promAddr, q string) (float64, bool, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+promAddr+"/api/v1/query?query="+url.QueryEscape(q), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, false, err
	}
	if r.Status != "success" {
		return 0, false, fmt.Errorf("query %s: %s", q, r.Error)
	}
	if len(r.Data.Result) == 0 {
		return 0, false, nil
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v, true, err
}
