//go:build docker && linux

package dockertest

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// Defect 1: a CMD that handles SIGINT and carries on is left running, and a
// later docker stop is a first SIGTERM: the CMD's own handler wins.
func TestDockerSIGINTThenStop(t *testing.T) {
	t.Parallel()
	f := newSQLite(t, "a")
	script := `trap 'echo got INT' INT; trap 'sleep 0.3; echo handled TERM; exit 0' TERM; touch /state/ready; ` +
		`while :; do sleep 0.1 & wait; done`
	c := runDetached(t, append(f.args("a"), "--env", "WHIMBREL_KILL_GRACE=1s", image, "sh", "-c", script)...)
	f.waitFile(t, "ready", 30*time.Second)
	mustDocker(t, "kill", "--signal", "INT", c.id)
	time.Sleep(2 * time.Second) // twice a kill grace that SIGINT could have armed
	if !c.running(t) {
		t.Fatalf("the container did not survive a SIGINT its command handles\nlogs:\n%s", c.logs(t))
	}
	mustDocker(t, "stop", "--time", "20", c.id)
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d after docker stop, want 0 (the command's TERM handler)\nlogs:\n%s", code, c.logs(t))
	}
	if a := f.get(t, "a"); a.State != state.Completed {
		t.Errorf("a: %s (%s), want COMPLETED", a.State, a.Reason)
	}
}

// interactive runs docker run -it on a terminal, types input, and returns
// what the terminal showed once it shows want, or fails after timeout.
func interactive(t *testing.T, args []string, input, want string, timeout time.Duration) string {
	t.Helper()
	master, slave := testbin.OpenPTY(t)
	cmd := exec.Command("docker", append([]string{"run", "--interactive", "--tty", "--rm", "--network", "host"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var mu sync.Mutex
	var all bytes.Buffer
	found := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			all.Write(buf[:n])
			hit := strings.Contains(all.String(), want)
			mu.Unlock()
			if hit {
				close(found)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Typed until read: the container may not be up when the first line
	// is typed, and a terminal keeps what is typed early anyway.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.After(timeout)
	_, _ = master.Write([]byte(input))
	for {
		select {
		case <-found:
			mu.Lock()
			defer mu.Unlock()
			return all.String()
		case <-tick.C:
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%q never showed on the terminal within %v (stopped on SIGTTIN?); it showed:\n%s", want, timeout, all.String())
		}
	}
}

// Defect 2: under docker run -it the command becomes the terminal's
// foreground process group and can read it.
func TestDockerInteractiveTerminal(t *testing.T) {
	t.Parallel()
	f := newSQLite(t, "a")
	args := append(f.args("a"), image, "sh", "-c", `read x; echo "got $x"`)
	interactive(t, args, "hello\n", "got hello", 30*time.Second)
	f.waitState(t, "a", state.Completed, 30*time.Second)
}

// Defect 3: under docker run -t the command's stderr is the terminal, so
// its stdout and stderr lines keep their order.
func TestDockerStderrOnTerminal(t *testing.T) {
	t.Parallel()
	f := newSQLite(t, "a")
	const n = 300
	script := `[ -t 2 ] && echo "stderr is a terminal"; i=0; while [ $i -lt ` + strconv.Itoa(n) +
		` ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`
	c := runDetached(t, append(f.args("a"), "--tty", image, "sh", "-c", script)...)
	if code := c.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, c.logs(t))
	}
	logs := c.logs(t)
	if !strings.Contains(logs, "stderr is a terminal") {
		t.Errorf("the command's stderr is not the terminal")
	}
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(logs, "\r", ""), "\n") {
		if strings.HasPrefix(l, "out ") || strings.HasPrefix(l, "err ") {
			lines = append(lines, l)
		}
	}
	misplaced := 0
	for i := 0; i < 2*n; i++ {
		want := "out " + strconv.Itoa(i/2)
		if i%2 == 1 {
			want = "err " + strconv.Itoa(i/2)
		}
		if i >= len(lines) || lines[i] != want {
			misplaced++
		}
	}
	if misplaced > 0 {
		t.Errorf("%d of %d stdout/stderr lines out of order or missing", misplaced, 2*n)
	}
}

// runTimed runs a container to its end and returns how long docker run took.
func runTimed(t *testing.T, args ...string) time.Duration {
	t.Helper()
	began := time.Now()
	out, err := docker(t, append([]string{"run", "--rm", "--network", "host"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return time.Since(began)
}

// Defect 3, continued: a background process holding stderr open does not
// delay the wrapper's exit by the 2 s drain timeout.
func TestDockerExitNotDelayedByStderrHolder(t *testing.T) {
	t.Parallel()
	f := newSQLite(t, "a")
	script := `(sleep 30 &); echo done >&2; exit 0`
	wrapped := runTimed(t, append(f.args("a"), image, "sh", "-c", script)...)
	tini := runTimed(t, "--entrypoint", "/usr/bin/tini", image, "--", "sh", "-c", script)
	t.Logf("docker run with a stderr holder: whimbrel-run %v, tini %v", wrapped, tini)
	if wrapped > tini+1500*time.Millisecond {
		t.Errorf("whimbrel-run took %v, tini %v: the drain waited for the holder", wrapped, tini)
	}
	if a := f.get(t, "a"); a.State != state.Completed || !strings.Contains(a.Error, "done") {
		t.Errorf("a: %s, stderr tail %q; want COMPLETED with the tail", a.State, a.Error)
	}
}

// sigIgn returns the SigIgn mask printed by cat /proc/self/status.
func sigIgn(t *testing.T, status string) uint64 {
	t.Helper()
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no SigIgn in:\n%s", status)
	return 0
}

// Defect 4: signals ignored by whatever started the wrapper stay ignored in
// the command, as under tini.
func TestDockerInheritedIgnoredSignals(t *testing.T) {
	t.Parallel()
	f := newSQLite(t, "a")
	bits := uint64(1<<(unix.SIGINT-1) | 1<<(unix.SIGHUP-1) | 1<<(unix.SIGTTOU-1))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"whimbrel-run", append(f.args("a"), "--entrypoint", "/bin/sh", image, "-c",
			`trap "" INT HUP TTOU; exec /usr/local/bin/whimbrel-run -- cat /proc/self/status`)},
		{"tini", []string{"--entrypoint", "/bin/sh", image, "-c", `trap "" INT HUP TTOU; exec /usr/bin/tini -- cat /proc/self/status`}},
	} {
		out, err := docker(t, append([]string{"run", "--rm", "--network", "host"}, tc.args...)...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := sigIgn(t, out); got&bits != bits {
			t.Errorf("%s: the command's SigIgn is %016x, want INT, HUP and TTOU (%016x) in it", tc.name, got, bits)
		}
	}
}

// slowProxy forwards TCP connections to target, holding every chunk sent
// towards it for delay; connected is closed at the first connection.
type slowProxy struct {
	addr      string
	connected chan struct{}
	once      sync.Once
}

func newSlowProxy(t *testing.T, target string, delay time.Duration) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{addr: ln.Addr().String(), connected: make(chan struct{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.once.Do(func() { close(p.connected) })
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				buf := make([]byte, 32*1024)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						time.Sleep(delay)
						if _, err := up.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						up.Close()
						return
					}
				}
			}()
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, up)
				c.Close()
			}()
		}
	}()
	return p
}

// Defect 5: SIGTERM while the claim is in flight: the command is not
// started, the activity is recorded FAILED by SIGTERM, exit 143.
func TestDockerSIGTERMDuringClaim(t *testing.T) {
	t.Parallel()
	var proxy *slowProxy
	f := newDynamo(t, func(st *dynamodb.Store) string {
		u := strings.TrimPrefix(dynamotest.Endpoint(t), "http://")
		proxy = newSlowProxy(t, u, time.Second)
		return "http://" + proxy.addr
	}, "a")
	c := runDetached(t, append(f.args("a"), image, "touch", "/state/ran")...)
	select {
	case <-proxy.connected: // the wrapper runs and catches signals: its claim is on its way
	case <-time.After(30 * time.Second):
		t.Fatalf("the wrapper never reached the store\n%s", c.logs(t))
	}
	mustDocker(t, "kill", "--signal", "TERM", c.id)
	if code := c.wait(t, time.Minute); code != 143 {
		t.Errorf("exit %d, want 143\n%s", code, c.logs(t))
	}
	if _, err := os.Stat(f.dir + "/ran"); err == nil {
		t.Errorf("the command ran after a SIGTERM that came before it started")
	}
	a := f.get(t, "a")
	if a.State != state.Failed || exitCode(a) != 143 || a.Signal != "SIGTERM" {
		t.Errorf("a: %s exit %d signal %q reason %q; want FAILED 143 SIGTERM", a.State, exitCode(a), a.Signal, a.Reason)
	}
}
