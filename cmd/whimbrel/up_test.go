package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// upServer is a `whimbrel up` running in a folder, as a person starts it.
type upServer struct {
	cmd      *exec.Cmd
	dir      string
	out, err *testbin.Buffer
	web      string // the address it printed, with its token
	exited   chan struct{}
}

// startUp starts `whimbrel up` in dir and waits for it to say where its
// web view is. The test's end stops it if the test did not.
func startUp(t *testing.T, dir string, args ...string) *upServer {
	t.Helper()
	s := &upServer{dir: dir, out: &testbin.Buffer{}, err: &testbin.Buffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(binary, append([]string{"up", "--web-addr", "127.0.0.1:0"}, args...)...)
	s.cmd.Dir = dir
	s.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.err
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.exited)
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.exited
		}
	})
	addr := regexp.MustCompile(`web view:\s+(http://\S+\?token=\S+)`)
	waitUntil(t, "whimbrel up printing its web view", func() bool {
		select {
		case <-s.exited:
			t.Fatalf("whimbrel up exited at start:\n%s\n%s", s.out, s.err)
		default:
		}
		m := addr.FindStringSubmatch(s.out.String())
		if m != nil {
			s.web = m[1]
		}
		return m != nil
	})
	return s
}

// interrupt sends SIGINT, as Ctrl-C does, and returns the exit code once
// whimbrel up has exited (within two minutes).
func (s *upServer) interrupt(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("whimbrel up did not exit within 2 minutes of Ctrl-C:\n%s\n%s", s.out, s.err)
	}
	return s.cmd.ProcessState.ExitCode()
}

// get fetches path from the web view, having presented the token as a
// browser does (the printed address, then its cookie).
func (s *upServer) get(t *testing.T, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	res, err := c.Get(s.web)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	base := strings.SplitN(s.web, "?", 2)[0]
	res, err = c.Get(strings.TrimSuffix(base, "/") + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, res.Status, b)
	}
	return string(b)
}

// whimbrelHere runs whimbrel in dir, as a person would beside whimbrel up.
func whimbrelHere(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return whimbrelIn(t, dir, nil, args...)
}

// pidsIn reads the pids a test's commands appended to a file, one a line.
func pidsIn(t *testing.T, path string) []int {
	t.Helper()
	b, _ := os.ReadFile(path)
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestUpServesSchedulesDetachedRunsAndTheWebView: whimbrel up fires a
// schedule every minute for three minutes, each run's output lands in
// .whimbrel/logs, the web view shows the runs, a second whimbrel up in
// the same folder refuses, start --detach says that up runs what it
// starts, and Ctrl-C cancels what runs and leaves no process behind.
func TestUpServesSchedulesDetachedRunsAndTheWebView(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pids, longPIDs := filepath.Join(dir, "pids"), filepath.Join(dir, "long-pids")
	if err := os.WriteFile(filepath.Join(dir, "tick.yaml"), []byte(`name: tick
activities:
  say:
    command: ["sh", "-c", "echo $$ $PPID >> `+pids+`; echo tick from $WHIMBREL_WORKFLOW_EXEC_ID"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "long.yaml"), []byte(`name: long
activities:
  wait:
    command: ["sh", "-c", "echo $$ $PPID >> `+longPIDs+`; exec sleep 600"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Before any whimbrel up, start --detach says that nothing runs it.
	if _, errOut, code := whimbrelHere(t, dir, "run", "tick.yaml"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	out, errOut, code := whimbrelHere(t, dir, "start", "--detach", "long.yaml")
	if code != 0 || !strings.Contains(errOut, "nothing runs it until whimbrel up serves") || !strings.Contains(errOut, "`whimbrel up` in "+dir) {
		t.Fatalf("start --detach without whimbrel up: exit %d\n%s%s", code, out, errOut)
	}
	waiting := strings.TrimSpace(out)

	s := startUp(t, dir)
	if _, errOut, code := whimbrelHere(t, dir, "up", "--web-addr", "127.0.0.1:0"); code != 1 || !strings.Contains(errOut, "whimbrel up already serves") ||
		!strings.Contains(errOut, "pid "+strconv.Itoa(s.cmd.Process.Pid)) {
		t.Errorf("a second whimbrel up: exit %d, want 1 and why:\n%s", code, errOut)
	}
	if out, errOut, code := whimbrelHere(t, dir, "schedule", "set", "every-minute", "tick.yaml", "--every", "1m", "--overlap", "allow"); code != 0 {
		t.Fatalf("schedule set: exit %d\n%s%s", code, out, errOut)
	}
	set := time.Now()

	// The execution started before whimbrel up ran is run now.
	waitUntil(t, "the detached execution running", func() bool {
		out, _, _ := whimbrelHere(t, dir, "status", waiting)
		return strings.Contains(out, "RUNNING")
	})

	// Three fires, one a minute, each run COMPLETED.
	var runs []string
	deadline := time.Now().Add(5 * time.Minute)
	for len(runs) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("schedule fired %d runs in 5 minutes, want 3\n%s\n%s", len(runs), s.out, s.err)
		}
		time.Sleep(2 * time.Second)
		out, _, _ := whimbrelHere(t, dir, "list", "--json", "--workflow", "tick", "--state", "COMPLETED")
		var rows []struct {
			ID        string `json:"workflow_exec_id"`
			RequestID string `json:"workflow_request_id"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("list --json: %v\n%s", err, out)
		}
		runs = runs[:0]
		for _, r := range rows {
			if strings.HasPrefix(r.RequestID, "every-minute@") {
				runs = append(runs, r.ID)
			}
		}
	}
	if took := time.Since(set); took < 2*time.Minute {
		t.Errorf("three fires of an every-minute schedule took %s", took)
	}
	for _, id := range runs {
		matches, _ := filepath.Glob(filepath.Join(dir, ".whimbrel", "logs", strings.ReplaceAll(id, "::", "-"), "say::*.log"))
		if len(matches) != 1 {
			t.Errorf("run %s: logs %v, want one say::*.log under .whimbrel/logs", id, matches)
			continue
		}
		if b, _ := os.ReadFile(matches[0]); !strings.Contains(string(b), "tick from "+id) {
			t.Errorf("%s holds %q", matches[0], b)
		}
	}
	page := s.get(t, "/")
	for _, id := range append(runs, waiting) {
		if !strings.Contains(page, id) {
			t.Errorf("the web view's list does not show %s", id)
		}
	}
	if page := s.get(t, "/schedules/every-minute"); !strings.Contains(page, runs[0]) {
		t.Errorf("the schedule's page does not show its run %s", runs[0])
	}
	out, errOut, code = whimbrelHere(t, dir, "start", "--detach", "long.yaml")
	if code != 0 || !strings.Contains(errOut, "whimbrel up (pid "+strconv.Itoa(s.cmd.Process.Pid)+") runs it") {
		t.Errorf("start --detach beside whimbrel up: exit %d\n%s%s", code, out, errOut)
	}
	second := strings.TrimSpace(out)
	waitUntil(t, "both long executions running", func() bool {
		a, _, _ := whimbrelHere(t, dir, "status", second)
		return strings.Contains(a, "RUNNING") && len(pidsIn(t, longPIDs)) == 4
	})

	// Ctrl-C: the running executions are cancelled, their commands and
	// wrappers stopped, and nothing whimbrel up started is left.
	if code := s.interrupt(t); code != 0 {
		t.Errorf("whimbrel up exited %d after Ctrl-C\n%s", code, s.err)
	}
	for _, pid := range append(pidsIn(t, pids), pidsIn(t, longPIDs)...) {
		if testbin.Alive(pid) {
			t.Errorf("process %d (a command or its wrapper) outlived whimbrel up", pid)
		}
	}
	for _, id := range []string{waiting, second} {
		out, _, _ := whimbrelHere(t, dir, "status", id)
		if !strings.Contains(out, "CANCELLED") || !strings.Contains(out, "interrupted: whimbrel up was stopped") {
			t.Errorf("status of %s after Ctrl-C:\n%s", id, out)
		}
	}
	if _, errOut, _ := whimbrelHere(t, dir, "start", "--detach", "long.yaml"); !strings.Contains(errOut, "nothing runs it until whimbrel up serves") {
		t.Errorf("start --detach after whimbrel up stopped:\n%s", errOut)
	}
}

// TestCancelStopsACommandAtOnceOnTheEmbeddedStore: on the embedded store
// the cancelling process wakes the wrapper, which stops its command well
// before its next heartbeat (every 15 s by default).
func TestCancelStopsACommandAtOnceOnTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "pid")
	if err := os.WriteFile(filepath.Join(dir, "long.yaml"), []byte(`name: long
activities:
  wait:
    command: ["sh", "-c", "echo $$ > `+pidfile+`.tmp; mv `+pidfile+`.tmp `+pidfile+`; exec sleep 600"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startUp(t, dir)
	out, errOut, code := whimbrelHere(t, dir, "start", "--detach", "long.yaml")
	if code != 0 {
		t.Fatalf("start --detach: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	pid := testbin.PIDFile(t, pidfile)
	// Past the claim's first heartbeat window, so that a beat is not due.
	time.Sleep(time.Second)
	out, errOut, code = whimbrelHere(t, dir, "cancel", id)
	if code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, errOut)
	}
	cancelled := time.Now()
	for testbin.Alive(pid) {
		if time.Since(cancelled) > 2*time.Second {
			t.Fatalf("the command still runs %s after the cancel returned", time.Since(cancelled).Round(time.Millisecond))
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitUntil(t, "the stop recorded", func() bool {
		out, _, _ := whimbrelHere(t, dir, "status", id)
		return strings.Contains(out, "CANCELLED_RUNNING")
	})
	if code := s.interrupt(t); code != 0 {
		t.Errorf("whimbrel up exited %d\n%s", code, s.err)
	}
}
