//go:build docker && linux

package dockertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// entry is one way to start the command: whimbrel-run or tini, as PID 1.
type entry struct {
	name string
	args func(tag string) []string // docker run arguments up to the command
}

// side runs the same commands under whimbrel-run and tini in the same
// image, and collects the table RELIABILITY.md shows.
type side struct {
	f       *fixture
	entries []entry
	mu      sync.Mutex
	next    int
	rows    map[string][]string
}

const sideActivities = 80

func newSide(t *testing.T) *side {
	names := make([]string, sideActivities)
	for i := range names {
		names[i] = fmt.Sprintf("r%02d", i)
	}
	s := &side{f: newSQLite(t, names...), rows: map[string][]string{}}
	vol := []string{"--volume", s.f.dir + ":/state"}
	s.entries = []entry{
		{"whimbrel-run", func(tag string) []string { return append(s.f.args(s.activity(t)), image) }},
		{"tini", func(tag string) []string { return append(vol, "--entrypoint", "/usr/bin/tini", image, "--") }},
	}
	return s
}

// activity hands out a fresh QUEUED activity for one whimbrel-run run.
func (s *side) activity(t *testing.T) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == sideActivities {
		t.Fatal("side by side: out of activities; raise sideActivities")
	}
	s.next++
	return fmt.Sprintf("r%02d", s.next-1)
}

func (s *side) record(row string, cells ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[row] = cells
}

// run runs a container to its end with stdin, returning its exit code and
// stdout.
func run(t *testing.T, args []string, stdin []byte) (int, []byte, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"run", "--rm", "--interactive", "--network", "host"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if cmd.ProcessState == nil {
		t.Fatalf("docker run: %v", err)
	}
	return cmd.ProcessState.ExitCode(), out.Bytes(), errOut.Bytes()
}

// TestTiniSideBySide compares whimbrel-run with tini, both PID 1 of the
// same image, and logs the table (WHIMBREL_TINI_TABLE=FILE also writes it
// there). It fails where whimbrel-run differs from tini other than on
// purpose.
func TestTiniSideBySide(t *testing.T) {
	t.Parallel()
	s := newSide(t)

	t.Run("group", func(t *testing.T) {
		t.Run("exit codes", func(t *testing.T) {
			t.Parallel()
			for _, tc := range []struct {
				row string
				cmd []string
			}{
				{"exit 0", []string{"sh", "-c", "exit 0"}},
				{"exit 1", []string{"sh", "-c", "exit 1"}},
				{"exit 7", []string{"sh", "-c", "exit 7"}},
				{"exit 255", []string{"sh", "-c", "exit 255"}},
				{"not executable (126)", []string{"/etc/passwd"}},
				{"not found (127)", []string{"/no/such/command"}},
				{"killed by SIGTERM (128+15)", []string{"sh", "-c", "kill -TERM $$"}},
				{"killed by SIGKILL (128+9)", []string{"sh", "-c", "kill -KILL $$"}},
			} {
				var cells []string
				for _, e := range s.entries {
					code, _, _ := run(t, append(e.args(""), tc.cmd...), nil)
					cells = append(cells, strconv.Itoa(code))
				}
				s.record("exit status: "+tc.row, cells...)
				if cells[0] != cells[1] {
					t.Errorf("%s: whimbrel-run %s, tini %s", tc.row, cells[0], cells[1])
				}
			}
		})

		t.Run("signal forwarding", func(t *testing.T) {
			t.Parallel()
			for _, sig := range []string{"TERM", "INT", "HUP", "USR1", "USR2", "QUIT", "WINCH"} {
				var cells []string
				for i, e := range s.entries {
					ready := fmt.Sprintf("ready-%s-%d", sig, i)
					script := fmt.Sprintf(`trap "exit 42" %s; touch /state/%s; while :; do sleep 0.1 & wait; done`, sig, ready)
					c := runDetached(t, append(e.args(""), "sh", "-c", script)...)
					s.f.waitFile(t, ready, 30*time.Second)
					mustDocker(t, "kill", "--signal", sig, c.id)
					code := c.wait(t, 30*time.Second)
					cell := "forwarded"
					if code != 42 {
						cell = fmt.Sprintf("not forwarded (exit %d)", code)
					}
					cells = append(cells, cell)
				}
				s.record("signal forwarded to CMD: SIG"+sig, cells...)
				if cells[0] != cells[1] {
					t.Errorf("SIG%s: whimbrel-run %s, tini %s", sig, cells[0], cells[1])
				}
			}
		})

		t.Run("group signalling", func(t *testing.T) {
			t.Parallel()
			variants := []struct {
				name string
				args func() []string
			}{
				{"whimbrel-run", func() []string { return s.entries[0].args("") }},
				{"whimbrel-run --signal-child-only", func() []string {
					return append([]string{"--env", "WHIMBREL_SIGNAL_CHILD_ONLY=true"}, s.entries[0].args("")...)
				}},
				{"tini", func() []string { return s.entries[1].args("") }},
				{"tini -g", func() []string {
					return []string{"--volume", s.f.dir + ":/state", "--entrypoint", "/usr/bin/tini", image, "-g", "--"}
				}},
			}
			got := map[string]bool{}
			for i, v := range variants {
				mark := fmt.Sprintf("gc-%d", i)
				script := fmt.Sprintf(`sh -c 'trap "touch /state/%s; exit 0" USR1; while :; do sleep 0.1; done' & `+
					`trap ":" USR1; touch /state/ready-g%d; wait; sleep 1`, mark, i)
				c := runDetached(t, append(v.args(), "sh", "-c", script)...)
				s.f.waitFile(t, fmt.Sprintf("ready-g%d", i), 30*time.Second)
				time.Sleep(200 * time.Millisecond) // the child's trap is set
				mustDocker(t, "kill", "--signal", "USR1", c.id)
				c.wait(t, 30*time.Second)
				_, err := os.Stat(filepath.Join(s.f.dir, mark))
				got[v.name] = err == nil
			}
			cell := func(b bool) string {
				if b {
					return "whole group"
				}
				return "CMD only"
			}
			s.record("SIGUSR1 reaches (default)", cell(got["whimbrel-run"]), cell(got["tini"]))
			s.record("SIGUSR1 reaches (--signal-child-only / tini -g)", cell(got["whimbrel-run --signal-child-only"]), cell(got["tini -g"]))
			if !got["whimbrel-run"] || got["whimbrel-run --signal-child-only"] || got["tini"] || !got["tini -g"] {
				t.Errorf("group signalling: %v; want whimbrel-run and tini -g to reach the group, the others CMD only", got)
			}
		})

		t.Run("reaping", func(t *testing.T) {
			t.Parallel()
			script := `for i in $(seq 1000); do (true &); done; sleep 1; cat /proc/[0-9]*/stat 2>/dev/null | grep -c ") Z "`
			var cells []string
			for _, e := range s.entries {
				_, out, _ := run(t, append(e.args(""), "sh", "-c", script), nil)
				cells = append(cells, "zombies left after 1,000 orphans: "+strings.TrimSpace(string(out)))
			}
			s.record("reaping", cells...)
			if cells[0] != cells[1] || !strings.HasSuffix(cells[0], ": 0") {
				t.Errorf("reaping: whimbrel-run %q, tini %q", cells[0], cells[1])
			}
		})

		t.Run("stdio untouched", func(t *testing.T) {
			t.Parallel()
			data := make([]byte, 1<<20)
			_, _ = rand.Read(data)
			var cells []string
			for _, e := range s.entries {
				_, out, _ := run(t, append(e.args(""), "cat"), data)
				_, _, errOut := run(t, append(e.args(""), "sh", "-c", "cat >&2"), data)
				cell := "1 MiB of random bytes: stdout identical"
				if !bytes.Equal(out, data) {
					cell = fmt.Sprintf("stdout DIFFERS (%d bytes)", len(out))
				}
				// whimbrel-run logs to stderr too; the command's bytes must be
				// there, unchanged and in one piece.
				if bytes.Contains(errOut, data) {
					cell += ", stderr identical"
				} else {
					cell += ", stderr DIFFERS"
				}
				cells = append(cells, cell)
			}
			s.record("stdin → stdout, stdin → stderr", cells...)
			for i, c := range cells {
				if strings.Contains(c, "DIFFERS") {
					t.Errorf("%s: %s", s.entries[i].name, c)
				}
			}
		})

		t.Run("start", func(t *testing.T) {
			t.Parallel()
			// PID 1's start to CMD's start, from the start times in
			// /proc/PID/stat (clock ticks since boot, 100 a second), median
			// of 5: what the entry point costs before the command runs. For
			// whimbrel-run it includes the claim on the mounted embedded store.
			script := `set -- $(cut -d" " -f22 /proc/1/stat) $(cut -d" " -f22 /proc/$$/stat); echo $(($2 - $1))`
			var cells []string
			for _, e := range s.entries {
				var ticks []int
				for range 5 {
					code, out, errOut := run(t, append(e.args(""), "sh", "-c", script), nil)
					n, err := strconv.Atoi(strings.TrimSpace(string(out)))
					if code != 0 || err != nil {
						t.Fatalf("%s: exit %d, output %q\n%s", e.name, code, out, errOut)
					}
					ticks = append(ticks, n)
				}
				sort.Ints(ticks)
				cells = append(cells, fmt.Sprintf("%d ms (min %d, max %d)", ticks[2]*10, ticks[0]*10, ticks[4]*10))
			}
			s.record("PID 1 start → CMD start, median of 5", cells...)
		})
	})

	var rows []string
	for r := range s.rows {
		rows = append(rows, r)
	}
	sort.Strings(rows)
	var b strings.Builder
	b.WriteString("| | whimbrel-run | tini |\n| --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", r, strings.Join(s.rows[r], " | "))
	}
	t.Logf("side by side with tini:\n%s", b.String())
	if path := os.Getenv("WHIMBREL_TINI_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
}
