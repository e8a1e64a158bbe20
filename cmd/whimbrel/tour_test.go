package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadmeTour runs the README's five-minute tour as a newcomer would, in
// a fresh folder on the embedded store: the retried, data-passing example
// with whimbrel run, the schedule fired by a monitor and run by a launcher,
// and the web view's API over both. If it fails, the README's tour is
// wrong: fix the tour (README.md, examples/tour.yaml) with the code.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Dir(binary)

	out, errOut, code := runIn(t, dir, nil, example(t, "tour.yaml"), "--param", "city=Oslo")
	for _, want := range []string{"FAILED  exit status 75  (attempt 1 of 3)", "COMPLETED  in", "(attempt 2 of 3)", "COMPLETED in"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("whimbrel run examples/tour.yaml: exit %d, want 0 and %q in\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, ".whimbrel", "logs", "*", "report::*.log"))
	if len(logs) != 1 {
		t.Fatalf("report's logs: %v, want one", logs)
	}
	if b, _ := os.ReadFile(logs[0]); !strings.Contains(string(b), "Oslo: 4 °C") || !strings.Contains(string(b), `"outputs":{"fetch":{"city":"Oslo","celsius":4}}`) {
		t.Errorf("report's log lacks the reading and its inputs:\n%s", b)
	}

	if out, errOut, code := whimbrelIn(t, dir, nil, "schedule", "set", "tour-every-minute", example(t, "tour.yaml"), "--every", "1m", "--overlap", "allow", "--param", "city=Lima"); code != 0 {
		t.Fatalf("schedule set: exit %d\n%s%s", code, out, errOut)
	}
	for _, daemon := range []string{"whimbrel-monitor", "whimbrel-launcher"} {
		startDaemon(t, dir, filepath.Join(bin, daemon))
	}
	var show string
	for deadline := time.Now().Add(90 * time.Second); ; {
		show, _, _ = whimbrelIn(t, dir, nil, "schedule", "show", "tour-every-minute")
		if strings.Contains(show, "COMPLETED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the schedule's first run did not complete within 90 s:\n%s", show)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !regexp.MustCompile(`tour::\S+\s+COMPLETED`).MatchString(show) {
		t.Errorf("schedule show does not name the completed run:\n%s", show)
	}

	addr, token := startWeb(t, dir, binary)
	req, err := http.NewRequest(http.MethodGet, addr+"/api/schedules/tour-every-minute", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sched struct {
		RunLog []struct {
			State string `json:"state"`
		} `json:"run_log"`
	}
	err = json.NewDecoder(resp.Body).Decode(&sched)
	completed := false
	for _, r := range sched.RunLog {
		completed = completed || r.State == "COMPLETED"
	}
	if err != nil || resp.StatusCode != http.StatusOK || !completed {
		t.Errorf("web API /api/schedules/tour-every-minute: %s, %+v, %v; want its completed run", resp.Status, sched, err)
	}
}

// startDaemon starts a participant in dir on a clean environment, as the
// tour does with `&`, and stops it with SIGTERM when the test ends.
func startDaemon(t *testing.T, dir, path string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return cmd
}

// startWeb starts `whimbrel web` on a free loopback port and returns its
// address and token, read from the line it prints.
func startWeb(t *testing.T, dir, whimbrel string) (addr, token string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, whimbrel, "web", "--addr", "127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1:]
				return
			}
		}
		close(found)
	}()
	select {
	case m, ok := <-found:
		if !ok {
			t.Fatal("whimbrel web ended without printing its address")
		}
		return m[0], m[1]
	case <-time.After(30 * time.Second):
		t.Fatal("whimbrel web printed no address within 30 s")
	}
	return "", ""
}
