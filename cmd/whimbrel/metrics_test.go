package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRunMetrics: whimbrel run --metrics-addr serves what its launcher
// and monitor see while the workflow runs; a --metrics-addr that is not
// HOST:PORT is a usage error.
func TestRunMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	def := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(def, []byte("name: m\nactivities:\n  nap: {command: [sleep, \"8\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runIn(t, dir, nil, "--metrics-addr", "nonsense", def)
	if code != 2 || !strings.Contains(errOut, "--metrics-addr") {
		t.Fatalf("--metrics-addr nonsense: exit %d, want 2 and a message naming the flag:\n%s", code, errOut)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	seen := map[string]bool{}
	want := []string{
		`whimbrel_launches_total{launch_type="local",workflow="m"} 1`,
		`whimbrel_activities{state="RUNNING",workflow="m"} 1`,
		`whimbrel_workflows{state="RUNNING",workflow="m"} 1`,
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned: cancelled and waited for below
		defer wg.Done()
		c := &http.Client{Timeout: 5 * time.Second}
		for ctx.Err() == nil {
			if resp, err := c.Get("http://" + addr + "/metrics"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				for _, w := range want {
					seen[w] = seen[w] || strings.Contains(string(b), w)
				}
				mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	out, errOut, code := runIn(t, dir, nil, "--metrics-addr", addr, def)
	cancel()
	wg.Wait()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no scrape while the workflow ran showed %s", w)
		}
	}
}
