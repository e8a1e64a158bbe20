package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"

	"github.com/whimbrel/whimbrel/cmd/internal/cli"
	"github.com/whimbrel/whimbrel/state"
)

// usageCase is one command line that is wrong, and the flag its error
// must name.
type usageCase struct {
	bin  string // a binary beside whimbrel
	args []string
	flag string // the error names it
}

// commandPaths are whimbrel's commands and subcommands, each with
// placeholders for its positional arguments, from its own grammar.
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	var c CLI
	app, err := kong.New(&c, cli.Vars().CloneWith(kong.Vars{"default_max_running": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	var paths [][]string
	for _, leaf := range app.Model.Leaves(false) {
		path := strings.Fields(strings.TrimPrefix(leaf.FullPath(), app.Model.Name))
		for range leaf.Positional {
			path = append(path, "x")
		}
		paths = append(paths, path)
	}
	if len(paths) < 20 {
		t.Fatalf("found %d commands: %v", len(paths), paths)
	}
	return paths
}

// helpFlag matches a flag in --help: its name, and "=" when it takes a
// value, with its default.
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)(=(\S*))?`)

// flagCases walks the flags a command's --help lists: an unknown flag, each
// flag that takes a value given none, and each number or duration given
// words.
func flagCases(t *testing.T, bin string, path []string) []usageCase {
	t.Helper()
	help, errOut, code := runBin(t, bin, append(append([]string{}, path...), "--help")...)
	if code != 0 {
		t.Fatalf("%s %v --help: exit %d: %s", bin, path, code, errOut)
	}
	cases := []usageCase{{bin, append(append([]string{}, path...), "--no-such-flag"), "--no-such-flag"}}
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		name, valued, def := m[1], m[2] != "", strings.Trim(m[3], `"`)
		if !valued {
			continue
		}
		cases = append(cases, usageCase{bin, append(append([]string{}, path...), "--"+name), "--" + name + " needs a value"})
		switch {
		case regexp.MustCompile(`^\d+(ms|s|m|h)$`).MatchString(def):
			cases = append(cases, usageCase{bin, append(append([]string{}, path...), "--"+name, "soon"), "--" + name})
		case regexp.MustCompile(`^\d+$`).MatchString(def):
			cases = append(cases, usageCase{bin, append(append([]string{}, path...), "--"+name, "many"), "--" + name})
		}
	}
	return cases
}

// runBin runs one of the binaries in a fresh folder with a clean
// environment; code is -1 if it could not be run.
func runBin(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(binary), bin), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cmd.Dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code <= 0 {
		return out.String(), errb.String() + err.Error(), -1
	}
	return out.String(), errb.String(), code
}

// TestUsageErrorsExit2 walks every command and subcommand of whimbrel, and
// the flags of the other binaries, with wrong flags and values: each exits
// 2 with an error that names the flag, and a flag given no value says what
// it wants.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	var cases []usageCase
	for _, path := range commandPaths(t) {
		cases = append(cases, flagCases(t, "whimbrel", path)...)
	}
	for _, bin := range []string{"whimbrel-launcher", "whimbrel-monitor", "whimbrel-run", "whimbrel-poller"} {
		cases = append(cases, flagCases(t, bin, nil)...)
	}
	def := filepath.Join(t.TempDir(), "d.yaml")
	if err := os.WriteFile(def, []byte("name: d\nactivities:\n  a:\n    command: [\"true\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The values the commands check themselves. (The schedule commands'
	// triggers, times and zones have their own tests.)
	cases = append(cases, []usageCase{
		{"whimbrel", []string{"list", "--since", "yesterday"}, "--since"},
		{"whimbrel", []string{"list", "--limit", "-1"}, "--limit"},
		{"whimbrel", []string{"stats", "--since", "-3d"}, "--since"},
		{"whimbrel", []string{"start", "--wait-interval", "0s", def}, "--wait-interval"},
		{"whimbrel", []string{"start", "--retention", "forever", def}, "--retention"},
		{"whimbrel", []string{"start", "--request-id", "a\x1b[31mb", def}, "--request-id"},
		{"whimbrel", []string{"start", "--param", "novalue", def}, "--param"},
		{"whimbrel", []string{"start", "--params-file", "/no/such/file.json", def}, "--params-file"},
		{"whimbrel", []string{"run", "--max-running", "-1", def}, "--max-running"},
		{"whimbrel", []string{"run", "--retention", "0", def}, "--retention"},
		{"whimbrel", []string{"run", "--web", "--web-addr", "0.0.0.0:0", def}, "--web"},
		{"whimbrel", []string{"rerun", "--request-id", "a\x07b", "x::y"}, "--request-id"},
		{"whimbrel", []string{"up", "--max-running", "-1"}, "--max-running"},
		{"whimbrel", []string{"up", "--web-addr", "0.0.0.0:0"}, "--web-addr"},
		{"whimbrel", []string{"up", "--web-addr", "nonsense"}, "--web-addr"},
		{"whimbrel", []string{"up", "--store", "dynamodb"}, "sqlite:PATH"},
		{"whimbrel", []string{"web", "--addr", "nonsense"}, "nonsense"},
		{"whimbrel", []string{"web", "--token-file", "/no/such/token"}, "--token-file"},
		{"whimbrel", []string{"request", "--wait-interval", "0s", "w"}, "--wait-interval"},
		{"whimbrel", []string{"list", "--store", "postgres"}, "--store"},
		{"whimbrel", []string{"list", "--prefix", "a b"}, "prefix"},
		{"whimbrel-launcher", []string{"--types", "nomad"}, "--types"},
		{"whimbrel-launcher", []string{"--interval", "0s"}, "--interval"},
		{"whimbrel-launcher", []string{"--max-running", "-1"}, "--max-running"},
		{"whimbrel-monitor", []string{"--interval", "-1s"}, "--interval"},
		{"whimbrel-monitor", []string{"--adopt-pages", "-1"}, "--adopt-pages"},
		{"whimbrel-run", []string{"--kill-grace=-1s", "--activity-exec-id", "a::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "--workflow-exec-id", "w::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a52", "--", "true"}, "--kill-grace"},
		{"whimbrel-run", []string{"--heartbeat-interval", "10s", "--heartbeat-timeout", "5s", "--activity-exec-id", "a::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a51", "--workflow-exec-id", "w::0b0e3c0f-5d7a-4d8e-9c43-0f6b2d7c9a52", "--", "true"}, "heartbeat timeout"},
		{"whimbrel-poller", []string{"--poll-interval", "0s"}, "--poll-interval"},
	}...)
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan usageCase)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				_, errOut, code := runBin(t, c.bin, c.args...)
				want := cli.ExitUsage
				if c.bin == "whimbrel-run" { // its own failures keep clear of its command's codes
					want = state.ExitWrapperError
				}
				if code != want || !strings.Contains(errOut, c.flag) || strings.Contains(errOut, `"EOL"`) {
					mu.Lock()
					t.Errorf("%s %q: exit %d, want %d and an error naming %s:\n%s", c.bin, c.args, code, want, c.flag, errOut)
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range cases {
		work <- c
	}
	close(work)
	wg.Wait()
	t.Logf("%d wrong command lines tried", len(cases))
}
