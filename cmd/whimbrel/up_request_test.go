package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUpStartsRequestsOnTheEmbeddedStore: whimbrel request on the
// embedded store writes the request and exits 0 whether or not whimbrel
// up runs; a request written before whimbrel up starts once it runs, one
// written while it runs starts within seconds, each completes and whimbrel
// status shows it, and the same request ID written twice starts one run.
func TestUpStartsRequestsOnTheEmbeddedStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	embedded := "sqlite:.whimbrel/state.db" // the store whimbrel up serves in dir
	if err := os.WriteFile(filepath.Join(dir, "hello.yaml"), []byte(`name: hello
params:
  who: {default: "world"}
activities:
  say:
    command: ["sh", "-c", "echo hello $WHIMBREL_PARAM_WHO"]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := whimbrelHere(t, dir, "register", "--store", embedded, "hello.yaml"); code != 0 {
		t.Fatalf("register: exit %d\n%s%s", code, out, errOut)
	}
	// Before whimbrel up: written, and said what starts it.
	early, errOut, code := whimbrelHere(t, dir, "request", "--store", embedded, "hello", "--request-id", "early", "--param", "who=<script>")
	if code != 0 || !strings.Contains(errOut, "nothing starts it until whimbrel up serves") {
		t.Fatalf("request without whimbrel up: exit %d, want 0 and what starts it\n%s%s", code, early, errOut)
	}
	early = strings.TrimSpace(early)
	// The same ID twice: the second is refused or finds the first; either
	// way one run.
	if out, errOut, code := whimbrelHere(t, dir, "request", "--store", embedded, "hello", "--request-id", "twice"); code != 0 {
		t.Fatalf("request twice (first): exit %d\n%s%s", code, out, errOut)
	}
	whimbrelHere(t, dir, "request", "--store", embedded, "hello", "--request-id", "twice")

	s := startUp(t, dir)
	completed := func(id string) func() bool {
		return func() bool {
			out, _, _ := whimbrelHere(t, dir, "status", id)
			return strings.Contains(out, "COMPLETED")
		}
	}
	waitUntil(t, "the request written before whimbrel up completing", completed(early))

	// --wait returns once whimbrel up has run it (whimbrelHere bounds it).
	late, errOut, code := whimbrelHere(t, dir, "request", "--store", embedded, "hello", "--request-id", "late", "--wait", "--wait-interval", "200ms")
	if code != 0 || !strings.Contains(errOut, "whimbrel up (pid "+strconv.Itoa(s.cmd.Process.Pid)+") starts it") {
		t.Fatalf("request beside whimbrel up: exit %d, want 0 and that whimbrel up starts it\n%s%s", code, late, errOut)
	}
	late = strings.TrimSpace(late)
	waitUntil(t, "the request written beside whimbrel up completing", completed(late))
	if out, _, _ := whimbrelHere(t, dir, "status", early); !strings.Contains(out, "say") {
		t.Errorf("status %s shows no activity:\n%s", early, out)
	}

	waitUntil(t, "the request written twice completing", func() bool {
		out, _, _ := whimbrelHere(t, dir, "list", "--json", "--workflow", "hello", "--state", "COMPLETED")
		return strings.Contains(out, "twice")
	})
	out, _, _ := whimbrelHere(t, dir, "list", "--json", "--workflow", "hello")
	var rows []struct {
		ID        string `json:"workflow_exec_id"`
		RequestID string `json:"workflow_request_id"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	byRequest := map[string]int{}
	for _, r := range rows {
		byRequest[r.RequestID]++
	}
	if byRequest["twice"] != 1 || byRequest["early"] != 1 || byRequest["late"] != 1 || len(rows) != 3 {
		t.Errorf("runs by request ID = %v, want one each of early, late and twice:\n%s", byRequest, out)
	}
	if code := s.interrupt(t); code != 0 {
		t.Errorf("whimbrel up exited %d on Ctrl-C\n%s", code, s.err)
	}
}
