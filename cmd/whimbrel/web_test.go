package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWebCommand serves the web view as a process: it prints the address
// with a generated token, answers with it, refuses without it, and shuts
// down cleanly on SIGTERM.
func TestWebCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "sqlite:" + filepath.Join(dir, "state.db")
	if out, errOut, code := whimbrel(t, nil, "install", "--store", store); code != 0 {
		t.Fatalf("install: %d\n%s%s", code, out, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "web", "--addr", "127.0.0.1:0", "--store", store)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read the start line: %v", err)
	}
	m := regexp.MustCompile(`open (http://127\.0\.0\.1:\d+)/\?token=([0-9a-f]{64})\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("start line %q: want the address with a generated token", line)
	}
	base, token := m[1], m[2]
	get := func(path, tok string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/api/workflows", token); code != http.StatusOK {
		t.Errorf("with the token: %d, want 200", code)
	}
	if code := get("/api/workflows", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", code)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("whimbrel web did not exit after SIGTERM")
	}
}

func TestWebCommandRefusesAnOpenAddressWithoutAChosenToken(t *testing.T) {
	t.Parallel()
	store := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
	_, errOut, code := whimbrel(t, nil, "web", "--addr", "0.0.0.0:0", "--store", store)
	if code != 2 || !strings.Contains(errOut, "not loopback") {
		t.Errorf("exit %d, stderr %q: want 2 and why", code, errOut)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("short\n"), 0o600)
	_, errOut, code = whimbrel(t, nil, "web", "--addr", "127.0.0.1:0", "--store", store, "--token-file", tokenFile)
	if code != 2 || !strings.Contains(errOut, "at least 16") {
		t.Errorf("a short token: exit %d, stderr %q: want 2 and why", code, errOut)
	}
}

// TestRunWeb: whimbrel run --web prints the address of the run's page,
// which answers while the run goes on (and a little after, so open pages
// fetch its end).
func TestRunWeb(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--web", example(t, "etl.yaml"))
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	var link string
	for link == "" {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("no web view address in the output: %v", err)
		}
		link, _ = strings.CutPrefix(strings.TrimSpace(line), "web view: ")
	}
	m := regexp.MustCompile(`^http://127\.0\.0\.1:\d+/workflows/(nightly-etl::[^?]*)\?token=[0-9a-f]{64}$`).FindStringSubmatch(link)
	if m == nil {
		t.Fatalf("web view address %q: want the run's page on loopback with a token", link)
	}
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar, Timeout: 30 * time.Second}).Get(link)
	if err != nil {
		t.Fatalf("open the page: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-activity="extract"`) {
		t.Errorf("the page: %d, want 200 with the DAG", resp.StatusCode)
	}
	go io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Errorf("whimbrel run --web: %v, want exit 0", err)
	}
}
