package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// The two injections: a parameter and an upstream's output that close the
// arithmetic of `sh -c "echo $(( {{ ... }} ))"` and run a command of
// their own.
const (
	injectParam  = "base=2 )); echo INJECTED; echo $(( 3"
	injectOutput = `{"n": "1 )); echo INJECTED; echo $(( 1"}`
)

// injectWorkflow pastes both raw (the control, which must be injected),
// and passes them by shquote and by environment (which must not be).
const injectWorkflow = `
name: inject
params:
  base: {}
activities:
  raw_param:
    command: ["sh", "-c", "echo $(( {{ params.base }} ))"]
  quoted_param:
    command: ["sh", "-c", "printf 'value=%s\\n' {{ params.base | shquote }}"]
  env_param:
    command: ["sh", "-c", "printf 'value=%s\\n' \"$WHIMBREL_PARAM_BASE\""]
  up:
    command:
      - sh
      - -c
      - |
        printf '%s' 'OUTPUT' > "$WHIMBREL_OUTPUT"
  raw_output:
    depends_on: [up]
    command: ["sh", "-c", "echo $(( {{ outputs.up.n }} ))"]
  quoted_output:
    depends_on: [up]
    command: ["sh", "-c", "printf 'value=%s\\n' {{ outputs.up.n | shquote }}"]
  env_output:
    depends_on: [up]
    env: {N: "{{ outputs.up.n }}"}
    command: ["sh", "-c", "printf 'value=%s\\n' \"$N\""]
`

// activityLog is what an activity of a `whimbrel run` in dir printed.
func activityLog(t *testing.T, dir, activity string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, ".whimbrel", "logs", "*", activity+"::*.log"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the log of %s: %v, %v", activity, files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// injected reports whether a log holds the line the injected command
// prints (the value itself, printed whole, holds INJECTED within a line).
func injected(log string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.TrimSpace(l) == "INJECTED" {
			return true
		}
	}
	return false
}

// TestTemplatesDoNotInject: the parameter and the output that run a
// command when pasted raw into sh -c run nothing when written with
// shquote or passed by environment: the command prints the value whole.
// The raw form is run too, to show the attack is real here.
func TestTemplatesDoNotInject(t *testing.T) {
	t.Parallel()
	def := writeDefinition(t, strings.Replace(injectWorkflow, "'OUTPUT'", "'"+injectOutput+"'", 1))
	dir := t.TempDir()
	out, errOut, code := runIn(t, dir, nil, def, "--param", injectParam)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, w := range []string{"{{ params.base }} is pasted raw into the script of sh -c", "{{ outputs.up.n }} is pasted raw into the script of sh -c"} {
		if !strings.Contains(errOut, "warning: "+def+":") || !strings.Contains(errOut, w) {
			t.Errorf("whimbrel run did not warn %q:\n%s", w, errOut)
		}
	}
	if strings.Count(errOut, "warning:") != 2 {
		t.Errorf("want exactly the two warnings of the raw forms:\n%s", errOut)
	}
	// schedule set reads the same definition and warns the same.
	_, schedErr, code := whimbrel(t, nil, "schedule", "set", "--store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"), "inj", def, "--every", "1h")
	if code != 0 || strings.Count(schedErr, "warning: "+def+":") != 2 || !strings.Contains(schedErr, "{{ params.base }} is pasted raw") {
		t.Errorf("schedule set: exit %d; want 0 and the two warnings:\n%s", code, schedErr)
	}
	for _, a := range []string{"raw_param", "raw_output"} {
		if log := activityLog(t, dir, a); !injected(log) {
			t.Errorf("%s: the raw paste was not injected, so this test proves nothing:\n%s", a, log)
		}
	}
	for a, value := range map[string]string{
		"quoted_param": strings.TrimPrefix(injectParam, "base="), "env_param": strings.TrimPrefix(injectParam, "base="),
		"quoted_output": "1 )); echo INJECTED; echo $(( 1", "env_output": "1 )); echo INJECTED; echo $(( 1",
	} {
		log := activityLog(t, dir, a)
		if injected(log) || !strings.Contains(log, "\nvalue="+value+"\n") {
			t.Errorf("%s: injected, or the value not printed whole (want the line value=%s):\n%s", a, value, log)
		}
	}
}

const typedInjectWorkflow = `
name: inject-typed
params:
  base: {type: int}
activities:
  a:
    command: ["sh", "-c", "echo $(( {{ params.base }} + 1 ))"]
`

// TestTypedParamRefusesInjection: an int param refuses the injecting
// value at run and at start, exit 2, naming the param, the value and the
// rule, before anything is written; and no warning is printed for the
// raw paste of a value that can only be an int.
func TestTypedParamRefusesInjection(t *testing.T) {
	t.Parallel()
	def := writeDefinition(t, typedInjectWorkflow)
	want := `param "base": "2 )); echo INJECTED; echo $(( 3" is not an int`
	dir := t.TempDir()
	out, errOut, code := runIn(t, dir, nil, def, "--param", injectParam)
	if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "warning:") {
		t.Fatalf("run: exit %d, want 2 with %q and no warning\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, ".whimbrel")); err == nil {
		t.Error("a refused run made .whimbrel: nothing may be written")
	}
	dbPath := filepath.Join(t.TempDir(), "state.db")
	store := "sqlite:" + dbPath
	_, errOut, code = whimbrel(t, nil, "install", "--store", store)
	if code != 0 {
		t.Fatalf("install: exit %d\n%s", code, errOut)
	}
	_, errOut, code = whimbrel(t, nil, "start", "--store", store, "--detach", def, "--params-file", writeParams(t, `{"base": "2 )); echo INJECTED; echo $(( 3"}`))
	if code != 2 || !strings.Contains(errOut, want) {
		t.Fatalf("start --params-file: exit %d, want 2 with %q\n%s", code, want, errOut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := sqlite.Open(dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if wfs, err := st.Workflows(ctx, state.WorkflowQuery{}); err != nil || len(wfs) != 0 {
		t.Errorf("executions after a refused start: %d (%v); want none", len(wfs), err)
	}
	// A schedule's params are checked at set as a start's are: the
	// injection never reaches a fire.
	_, errOut, code = whimbrel(t, nil, "schedule", "set", "--store", store, "inj", def, "--every", "1h", "--param", injectParam)
	if code != 2 || !strings.Contains(errOut, want) {
		t.Fatalf("schedule set: exit %d, want 2 with %q\n%s", code, want, errOut)
	}
	if scheds, err := st.Schedules(ctx); err != nil || len(scheds) != 0 {
		t.Errorf("schedules after a refused set: %d (%v); want none", len(scheds), err)
	}
	out, errOut, code = whimbrelIn(t, t.TempDir(), nil, "run", def, "--param", "base=41")
	if code != 0 {
		t.Fatalf("run with an int: exit %d\n%s\n%s", code, out, errOut)
	}
}

func writeParams(t *testing.T, json string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "params.json")
	if err := os.WriteFile(p, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
