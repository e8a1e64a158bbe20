package testbin

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PIDFile waits up to 30 s for a file that holds a pid (written whole, as
// `echo $$ > f.tmp; mv f.tmp f`) and returns the pid.
func PIDFile(t testing.TB, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stat returns the state and the parent of pid, from /proc; ok is false
// once the process is gone.
func Stat(pid int) (state string, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// The command name is parenthesised and may hold spaces or
	// parentheses: the fields are taken after its last ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}

// Alive reports whether pid runs (a zombie does not).
func Alive(pid int) bool {
	state, _, ok := Stat(pid)
	return ok && state != "Z"
}

// WaitEnded waits up to 10 s until pid no longer runs (a signal takes the
// kernel a moment), and fails the test with why if it still does.
func WaitEnded(t testing.TB, pid int, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d %s", pid, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// GuardProcesses counts the running guard processes (whimbrel-run's, see
// package process) whose parent is pid.
func GuardProcesses(t testing.TB, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := Stat(p); !ok || ppid != pid {
			continue
		}
		if argv, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(argv), "whimbrel-runner-guard\x00") {
			n++
		}
	}
	return n
}
