package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// silentListener accepts connections on loopback and never answers: a
// black-holed VPC endpoint, a stuck proxy. It is closed when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read or answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// TestSilentEndpoint runs every command of whimbrel, and each daemon's
// single pass, against an endpoint that accepts connections and never
// answers: each exits 3 within 30 s (the default --store-timeout is 15 s),
// naming the endpoint and what to check.
func TestSilentEndpoint(t *testing.T) {
	t.Parallel()
	endpoint := silentListener(t)
	env := []string{
		"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=silent_",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=" + dynamotest.Region,
		"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y", "AWS_EC2_METADATA_DISABLED=true",
	}
	def := writeFile(t, "quiet.yaml", "name: quiet\nactivities:\n  a: {command: [\"true\"]}\n")
	id := state.NewWorkflowExecID("quiet")
	dir := filepath.Dir(binary)
	tests := []struct {
		name string
		bin  string
		args []string
	}{
		{"install", "whimbrel", []string{"install"}},
		{"start", "whimbrel", []string{"start", def}},
		{"run", "whimbrel", []string{"run", "--log-dir", t.TempDir(), def}},
		{"status", "whimbrel", []string{"status", id}},
		{"list", "whimbrel", []string{"list"}},
		{"cancel", "whimbrel", []string{"cancel", id}},
		{"rerun", "whimbrel", []string{"rerun", id}},
		{"stats", "whimbrel", []string{"stats"}},
		{"register", "whimbrel", []string{"register", def}},
		{"request", "whimbrel", []string{"request", "quiet"}},
		{"registered", "whimbrel", []string{"registered"}},
		{"launcher --once", "whimbrel-launcher", []string{"--once"}},
		{"monitor --once", "whimbrel-monitor", []string{"--once"}},
		// The poller has no single pass: its start-up reads the tables'
		// streams, and fails the same way.
		{"poller", "whimbrel-poller", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(dir, tc.bin), tc.args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("%s: got %v after %s, want a non-zero exit\n%s", tc.name, err, took, out.String())
			}
			if took > 30*time.Second {
				t.Errorf("%s took %s, want under 30 s", tc.name, took.Round(time.Second))
			}
			if ee.ExitCode() != cli.ExitStore {
				t.Errorf("%s: exit %d, want %d", tc.name, ee.ExitCode(), cli.ExitStore)
			}
			msg := out.String()
			// Which bound a silent endpoint hits first (one attempt's or the
			// whole call's) depends on the machine's load; either names the
			// flag that raises it.
			if !strings.Contains(msg, endpoint) || !(strings.Contains(msg, "--store-timeout") || strings.Contains(msg, "--store-attempt-timeout")) {
				t.Errorf("%s: the message names neither the endpoint %s nor what to check:\n%s", tc.name, endpoint, msg)
			}
		})
	}
}

// TestStoreTimeoutFlag: the bound is the operator's to change.
func TestStoreTimeoutFlag(t *testing.T) {
	t.Parallel()
	endpoint := silentListener(t)
	env := []string{
		"WHIMBREL_STORE=dynamodb", "AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_REGION=" + dynamotest.Region,
		"AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y", "AWS_EC2_METADATA_DISABLED=true",
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", env, []string{"list", "--store-timeout", "2s"}},
		{"env", append(env, "WHIMBREL_STORE_TIMEOUT=2s"), []string{"list"}},
	} {
		start := time.Now()
		_, errOut, code := whimbrel(t, tc.env, tc.args...)
		if took := time.Since(start); code != cli.ExitStore || took > 10*time.Second || !strings.Contains(errOut, "within 2s") {
			t.Errorf("%s: exit %d after %s, want %d within about 2 s\n%s", tc.name, code, took.Round(time.Millisecond), cli.ExitStore, errOut)
		}
	}
}

// TestSetupErrors: what a new user meets first says what to do.
func TestSetupErrors(t *testing.T) {
	t.Parallel()
	prefix := dynamotest.Prefix(t)
	env := dynamotest.Env(t, prefix)
	withRegion := func(region string) []string {
		var out []string
		for _, e := range env {
			if !strings.HasPrefix(e, "AWS_REGION=") {
				out = append(out, e)
			}
		}
		if region != "" {
			out = append(out, "AWS_REGION="+region)
		}
		return out
	}
	var noCredentials []string
	for _, e := range env {
		if !strings.HasPrefix(e, "AWS_ACCESS_KEY_ID=") && !strings.HasPrefix(e, "AWS_SECRET_ACCESS_KEY=") {
			noCredentials = append(noCredentials, e)
		}
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"table missing (dynamodb)", env, []string{"list"},
			[]string{"table " + prefix + "workflow_exec does not exist: run `whimbrel install` (prefix \"" + prefix + "\", store dynamodb)"}},
		{"no region", withRegion(""), []string{"list"}, []string{"no AWS region", "AWS_REGION", "AWS_ENDPOINT_URL_DYNAMODB", "`whimbrel run` needs none"}},
		{"no credentials", noCredentials, []string{"list"}, []string{"no AWS credentials", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "`whimbrel run` needs none"}},
	} {
		_, errOut, code := whimbrel(t, tc.env, tc.args...)
		if code != cli.ExitStore {
			t.Errorf("%s: exit %d, want %d\n%s", tc.name, code, cli.ExitStore, errOut)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr does not say %q:\n%s", tc.name, w, errOut)
			}
		}
		if len(lines) != 1 || strings.Contains(errOut, "ResourceNotFoundException") || strings.Contains(errOut, "no such table") {
			t.Errorf("%s: want one line in Whimbrel's words, got:\n%s", tc.name, errOut)
		}
	}
}

// TestDaemonsOutliveASilentEndpoint: in loop mode, a launcher and a
// monitor whose store stops answering log each failed pass and try again
// at the next; they neither hang nor exit. The store answers at first (a
// launcher refuses to start on a store it cannot reach), then goes silent:
// the proxy in front of DynamoDB Local holds every request from then on.
func TestDaemonsOutliveASilentEndpoint(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	for _, tc := range []struct {
		bin     string
		args    []string
		started string // logged once the daemon has started
		want    string // logged at each failed pass
	}{
		{"whimbrel-launcher", []string{"--interval", "200ms", "--log-dir", t.TempDir()}, "launching", "poll failed; trying again"},
		{"whimbrel-monitor", []string{"--interval", "200ms"}, "sweeping", "sweep failed; trying again"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			t.Parallel()
			proxy := dynamotest.NewProxy(t)
			cmd := exec.Command(filepath.Join(filepath.Dir(binary), tc.bin), tc.args...)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
				"WHIMBREL_STORE=dynamodb", "WHIMBREL_TABLE_PREFIX=" + st.Prefix(), "AWS_ENDPOINT_URL_DYNAMODB=" + proxy.Endpoint,
				"AWS_REGION=" + dynamotest.Region, "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=y",
				"AWS_EC2_METADATA_DISABLED=true", "WHIMBREL_STORE_TIMEOUT=1s"}
			var out testbin.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			wait := func(what string, n int, within time.Duration) {
				t.Helper()
				deadline := time.After(within)
				for strings.Count(out.String(), what) < n {
					select {
					case err := <-exited:
						t.Fatalf("%s exited (%v) instead of going on:\n%s", tc.bin, err, out.String())
					case <-deadline:
						_ = cmd.Process.Kill()
						<-exited
						t.Fatalf("%s did not log %q %d times in %s:\n%s", tc.bin, what, n, within, out.String())
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
			wait(tc.started, 1, time.Minute)
			proxy.SetDelay(time.Hour) // from now on the store accepts and never answers
			wait(tc.want, 3, 30*time.Second)
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
				t.Errorf("%s did not stop on SIGINT within 10 s", tc.bin)
			}
			if !strings.Contains(out.String(), proxy.Endpoint) {
				t.Errorf("the failures do not name the endpoint:\n%s", out.String())
			}
		})
	}
}
