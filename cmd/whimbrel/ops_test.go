package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
)

// launcherFor runs a real whimbrel-launcher on the test's tables until the
// test ends.
func launcherFor(t *testing.T, env []string) {
	t.Helper()
	l := exec.Command(filepath.Join(filepath.Dir(binary), "whimbrel-launcher"), "--interval", "200ms", "--log-dir", t.TempDir())
	l.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = l.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = l.Process.Kill()
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOperatorCommands runs completed, failed, running and cancelled
// executions through status, list, stats, cancel and rerun.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	env := dynamotest.Env(t, dynamotest.Prefix(t))
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	launcherFor(t, env)
	dir := t.TempDir()
	count, cause, pidfile := filepath.Join(dir, "count"), filepath.Join(dir, "fixed"), filepath.Join(dir, "pid")

	// Completed.
	ok := writeFile(t, "ok.yaml", "name: quick\nactivities:\n  one: {command: [\"true\"]}\n  two: {command: [\"true\"], depends_on: [one]}\n")
	out, errOut, code := whimbrel(t, env, "start", "--wait", "--wait-interval", "100ms", ok)
	if code != 0 {
		t.Fatalf("completed workflow: %s", errOut)
	}
	completedID := strings.TrimSpace(out)

	// Failed: check fails until its cause is fixed; prepare counts its runs.
	flaky := writeFile(t, "flaky.yaml", `name: flaky
activities:
  prepare:
    command: ["sh", "-c", "echo run >> `+count+`"]
  check:
    depends_on: [prepare]
    command: ["sh", "-c", "test -e `+cause+` || { echo 'input file missing' >&2; exit 3; }"]
  publish:
    depends_on: [check]
    command: ["true"]
`)
	out, _, code = whimbrel(t, env, "start", "--wait", "--wait-interval", "100ms", flaky)
	failedID := strings.TrimSpace(out)
	if code != 1 {
		t.Fatalf("failing workflow exited %d", code)
	}

	// Running, then cancelled.
	long := writeFile(t, "long.yaml", `name: long
defaults: {heartbeat_interval: 500ms, heartbeat_timeout: 5s}
activities:
  slow:
    command: ["sh", "-c", "echo $$ > `+pidfile+`; exec sleep 300"]
  after:
    depends_on: [slow]
    command: ["true"]
`)
	out, errOut, code = whimbrel(t, env, "start", long)
	if code != 0 {
		t.Fatalf("start long: %s", errOut)
	}
	runningID := strings.TrimSpace(out)
	waitUntil(t, "the slow activity running", func() bool {
		b, err := os.ReadFile(pidfile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	b, _ := os.ReadFile(pidfile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))

	// status, as text and as JSON.
	out, _, _ = whimbrel(t, env, "status", failedID)
	for _, want := range []string{"FAILED", "prepare", "  check", "exit status 3", "stderr: input file missing", "    publish", "CANCELLED"} {
		if !strings.Contains(out, want) {
			t.Errorf("status of the failed workflow lacks %q:\n%s", want, out)
		}
	}
	waitUntil(t, "a heartbeat", func() bool {
		out, _, _ = whimbrel(t, env, "status", "--json", runningID)
		var s struct {
			Workflow   struct{ State string }
			Activities []struct {
				Name         string   `json:"activity_name"`
				State        string   `json:"state"`
				HeartbeatAge *float64 `json:"last_heartbeat_age_seconds"`
			}
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("status --json does not parse: %v\n%s", err, out)
		}
		return s.Workflow.State == "RUNNING" && len(s.Activities) == 2 && s.Activities[0].Name == "slow" &&
			s.Activities[0].State == "RUNNING" && s.Activities[0].HeartbeatAge != nil && *s.Activities[0].HeartbeatAge < 5
	})
	if _, errOut, code := whimbrel(t, env, "status", "long::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51"); code != 1 || !strings.Contains(errOut, "no workflow execution") {
		t.Errorf("status of a missing execution: exit %d %s", code, errOut)
	}

	// cancel stops the running wrapper's command.
	out, errOut, code = whimbrel(t, env, "cancel", runningID)
	if code != 0 || !strings.Contains(out, "1 pending activities cancelled, 1 running ones told to stop") {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, errOut)
	}
	waitUntil(t, "the command stopped", func() bool { return syscall.Kill(pid, 0) != nil })
	waitUntil(t, "the stop recorded", func() bool {
		out, _, _ := whimbrel(t, env, "status", runningID)
		return strings.Contains(out, "CANCELLED_RUNNING") && strings.Contains(out, "143")
	})
	if out, _, code := whimbrel(t, env, "cancel", runningID); code != 0 || !strings.Contains(out, "already cancelled") {
		t.Errorf("second cancel: exit %d %s", code, out)
	}
	if _, errOut, code := whimbrel(t, env, "cancel", completedID); code != 1 || !strings.Contains(errOut, "is COMPLETED: it has settled") {
		t.Errorf("cancel of a completed workflow: exit %d %s", code, errOut)
	}

	// list: newest first, by state, by workflow, as JSON.
	out, _, _ = whimbrel(t, env, "list")
	if i, j, k := strings.Index(out, runningID), strings.Index(out, failedID), strings.Index(out, completedID); !(i >= 0 && i < j && j < k) {
		t.Errorf("list is not newest first:\n%s", out)
	}
	out, _, _ = whimbrel(t, env, "list", "--state", "FAILED")
	if !strings.Contains(out, failedID) || strings.Contains(out, completedID) || strings.Contains(out, runningID) {
		t.Errorf("list --state FAILED:\n%s", out)
	}
	out, _, _ = whimbrel(t, env, "list", "--workflow", "quick", "--json")
	var rows []struct {
		ID    string `json:"workflow_exec_id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].ID != completedID || rows[0].State != "COMPLETED" {
		t.Errorf("list --workflow quick --json: %v\n%s", err, out)
	}
	if _, errOut, code := whimbrel(t, env, "list", "--since", "soon"); code != 2 || !strings.Contains(errOut, "--since") {
		t.Errorf("list --since soon: exit %d %s", code, errOut)
	}

	// rerun --from-failure, once the cause is fixed, runs only what had not
	// completed.
	if err := os.WriteFile(cause, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = whimbrel(t, env, "rerun", "--from-failure", failedID)
	if code != 0 {
		t.Fatalf("rerun: %s", errOut)
	}
	rerunID := strings.TrimSpace(out)
	waitUntil(t, "the redrive completed", func() bool {
		out, _, _ := whimbrel(t, env, "status", "--json", rerunID)
		return strings.Contains(out, `"state": "COMPLETED"`) && !strings.Contains(out, `"state": "READY"`) && !strings.Contains(out, `"state": "RUNNING"`) &&
			strings.Count(out, `"state": "COMPLETED"`) == 4 // the workflow and its three activities
	})
	if b, _ := os.ReadFile(count); strings.Count(string(b), "run") != 1 {
		t.Errorf("prepare ran %d times, want once: the redrive must not run it again", strings.Count(string(b), "run"))
	}
	out, _, _ = whimbrel(t, env, "status", rerunID)
	if !strings.Contains(out, "carried from prepare::") {
		t.Errorf("the redrive's status does not point at the old activity:\n%s", out)
	}
	if _, errOut, code := whimbrel(t, env, "rerun", "--from-failure", completedID); code != 1 || !strings.Contains(errOut, "nothing is left to run") {
		t.Errorf("redrive of a completed workflow: exit %d %s", code, errOut)
	}

	// stats.
	out, _, _ = whimbrel(t, env, "stats", "--json")
	var stats []struct {
		Name    string         `json:"workflow_name"`
		Total   int            `json:"total"`
		ByState map[string]int `json:"by_state"`
		Rate    *float64       `json:"success_rate"`
	}
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range stats {
		got[s.Name] = strconv.Itoa(s.Total) + " " + strconv.Itoa(s.ByState["COMPLETED"])
	}
	if got["flaky"] != "2 1" || got["quick"] != "1 1" || got["long"] != "1 0" {
		t.Errorf("stats: %v\n%s", got, out)
	}
	if out, _, _ := whimbrel(t, env, "stats"); !strings.Contains(out, "flaky") || !strings.Contains(out, "50.0%") {
		t.Errorf("stats text:\n%s", out)
	}
}
