package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/whimbrel/whimbrel/inspect"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
)

// The end-to-end tests of the data contract (params, outputs, inputs,
// templates, progress) run `whimbrel run` (supervising inline, its default)
// running real commands, on the embedded store and on DynamoDB Local, and
// once with a whimbrel-run process each on the embedded store.

// writeDefinition writes a workflow definition into a fresh directory.
func writeDefinition(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "workflow.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// storeArgs are the flags that make a `whimbrel` command read the store a
// run in dir with env wrote to.
func storeArgs(dir string, env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "WHIMBREL_TABLE_PREFIX=") {
			return nil // the environment names it
		}
	}
	return []string{"--store", "sqlite:" + filepath.Join(dir, ".whimbrel", "state.db")}
}

// onlyExecution returns the ID of the one execution of name in the store.
func onlyExecution(t *testing.T, st state.Store, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if len(wfs) != 1 {
		t.Fatalf("%d executions of %s, want 1", len(wfs), name)
	}
	return wfs[0].WorkflowExecID
}

// statusJSON runs `whimbrel status --json`.
func statusJSON(t *testing.T, dir string, env []string, id string) *inspect.Status {
	t.Helper()
	out, errOut, code := whimbrel(t, env, append(append([]string{"status", "--json"}, storeArgs(dir, env)...), id)...)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s", code, errOut)
	}
	var s inspect.Status
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return &s
}

func activityOf(t *testing.T, s *inspect.Status, name string) inspect.Activity {
	t.Helper()
	for _, a := range s.Activities {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("status has no activity %s", name)
	return inspect.Activity{}
}

func sameJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Errorf("%s = %s, want %s", what, gb, wb)
	}
}

const twoStepWorkflow = `
name: data-two-step
params:
  base: {required: true, description: "added to n"}
  label: {default: "plain"}
activities:
  first:
    command: ["sh", "-c", "echo '{\"n\": 41}' > \"$WHIMBREL_OUTPUT\""]
  second:
    depends_on: [first]
    env:
      N: "{{ outputs.first.n }}"
      LABEL: "{{ params.label }}-{{ params.base }}"
    command:
      - sh
      - -c
      - |
        set -e
        by_template=$(( {{ outputs.first.n }} + {{ params.base }} ))
        n=$(sed -n 's/.*"outputs":{"first":{"n":\([0-9][0-9]*\)}}.*/\1/p' "$WHIMBREL_INPUTS")
        base=$(sed -n 's/.*"params":{[^}]*"base":"\([0-9][0-9]*\)".*/\1/p' "$WHIMBREL_INPUTS")
        by_inputs=$(( n + base ))
        by_env=$(( N + WHIMBREL_PARAM_BASE ))
        echo "{\"by_template\": $by_template, \"by_inputs\": $by_inputs, \"by_env\": $by_env, \"label\": \"$LABEL\", \"literal\": \"{{ "{{" }}x}}\"}" > "$WHIMBREL_OUTPUT"
`

// TestRunPassesDataBetweenActivities: the first activity outputs {"n": 41};
// the second computes n + base through a template, through
// WHIMBREL_INPUTS, and through templated env and WHIMBREL_PARAM_BASE.
// status --json shows the params and both outputs.
func TestRunPassesDataBetweenActivities(t *testing.T) {
	t.Parallel()
	def := writeDefinition(t, twoStepWorkflow)
	for name, env := range withProcess(stores(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runIn(t, dir, env, def, "--param", "base=1")
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			id := onlyExecution(t, openStore(t, dir, env), "data-two-step")
			checkSupervised(t, openStore(t, dir, env), name, id)
			s := statusJSON(t, dir, env, id)
			if got := s.Workflow.Params; got["base"] != "1" || got["label"] != "plain" || len(got) != 2 {
				t.Errorf("params = %v, want base=1 and the default label=plain", got)
			}
			sameJSON(t, "first's output", activityOf(t, s, "first").Output, `{"n": 41}`)
			sameJSON(t, "second's output", activityOf(t, s, "second").Output,
				`{"by_template": 42, "by_inputs": 42, "by_env": 42, "label": "plain-1", "literal": "{{x}}"}`)

			text, _, _ := whimbrel(t, env, append(append([]string{"status"}, storeArgs(dir, env)...), id)...)
			for _, want := range []string{"params: base=1, label=plain", `output: {"n":41}`} {
				if !strings.Contains(text, want) {
					t.Errorf("status lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

const badOutputWorkflow = `
name: data-bad-output
activities:
  big:
    command: ["sh", "-c", "printf '{\"s\": \"%s\"}' \"$(head -c 40000 /dev/zero | tr '\\0' a)\" > \"$WHIMBREL_OUTPUT\""]
  list:
    command: ["sh", "-c", "echo '[1, 2]' > \"$WHIMBREL_OUTPUT\""]
  broken:
    command: ["sh", "-c", "echo '{\"n\": ' > \"$WHIMBREL_OUTPUT\""]
  fine:
    command: ["sh", "-c", "echo '{\"n\": 1}' > \"$WHIMBREL_OUTPUT\""]
  after:
    depends_on: [big]
    command: ["true"]
  unresolved:
    depends_on: [fine]
    command: ["sh", "-c", "echo ran > MARKER; echo {{ outputs.fine.missing }}"]
`

// TestRunRefusesBadOutputs: an output over 32 KiB, or not a JSON object,
// fails its activity (though the command exited 0) with a message naming
// the limit and the file; what depended on it is cancelled. A template
// that cannot be resolved at launch fails its activity unstarted.
func TestRunRefusesBadOutputs(t *testing.T) {
	t.Parallel()
	for name, env := range withProcess(stores(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker := filepath.Join(t.TempDir(), "ran")
			def := writeDefinition(t, strings.Replace(badOutputWorkflow, "MARKER", marker, 1))
			out, errOut, code := runIn(t, dir, env, def)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			st := openStore(t, dir, env)
			s := statusJSON(t, dir, env, onlyExecution(t, st, "data-bad-output"))
			for _, tc := range []struct {
				activity string
				state    state.ActivityState
				reason   []string
			}{
				{"big", state.Failed, []string{"output.json (WHIMBREL_OUTPUT)", "40008 bytes of compact JSON", "at most 32768 bytes (32 KiB)", "by reference"}},
				{"list", state.Failed, []string{"output.json (WHIMBREL_OUTPUT)", "not an object"}},
				{"broken", state.Failed, []string{"output.json (WHIMBREL_OUTPUT)", "is not JSON"}},
				{"fine", state.Completed, nil},
				{"after", state.Cancelled, nil},
				{"unresolved", state.Failed, []string{"command not started", "command[2]: {{ outputs.fine.missing }}: outputs.fine.missing is absent (keys there: n)"}},
			} {
				a := activityOf(t, s, tc.activity)
				if a.State != tc.state {
					t.Errorf("%s is %s (%s), want %s", tc.activity, a.State, a.Reason, tc.state)
				}
				for _, want := range tc.reason {
					if !strings.Contains(a.Reason, want) {
						t.Errorf("%s's reason %q lacks %q", tc.activity, a.Reason, want)
					}
				}
				if tc.activity == "unresolved" {
					if _, err := os.Stat(marker); err == nil {
						t.Error("the command with an unresolved template ran")
					}
					continue
				}
				if tc.state == state.Failed && (a.ExitCode == nil || *a.ExitCode != 0 || len(a.Output) != 0) {
					t.Errorf("%s: exit code %v, output %s; want the command's 0 and no output", tc.activity, a.ExitCode, a.Output)
				}
			}
		})
	}
}

const paramsWorkflow = `
name: data-params
params:
  date: {required: true, description: "the day to process"}
  region: {required: true}
  base: {default: "0"}
activities:
  a:
    command: ["echo", "{{ params.date }}"]
`

// TestMissingParamsAreRefusedBeforeAnyWrite: every missing required
// param and every undeclared one is named in one error, and nothing is
// written: whimbrel run creates no store, whimbrel start no execution.
func TestMissingParamsAreRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	def := writeDefinition(t, paramsWorkflow)
	wantAll := []string{`param "date" is required: the day to process`, `param "region" is required`,
		`param "bse" is not declared by workflow data-params (did you mean "base"?)`}
	for name, env := range stores(t) {
		t.Run("run/"+name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runIn(t, dir, env, def, "--param", "bse=1")
			if code != 2 {
				t.Fatalf("exit %d, want 2 (usage)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			for _, want := range wantAll {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			if name == "sqlite" {
				if _, err := os.Stat(filepath.Join(dir, ".whimbrel")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("whimbrel run made .whimbrel (%v); nothing may be written", err)
				}
				return
			}
			prefix := ""
			for _, kv := range env {
				if p, ok := strings.CutPrefix(kv, "WHIMBREL_TABLE_PREFIX="); ok {
					prefix = p
				}
			}
			_, err := dynamotest.Client(t).DescribeTable(context.Background(), &awsdynamodb.DescribeTableInput{TableName: aws.String(prefix + "workflow_exec")})
			var nf *types.ResourceNotFoundException
			if !errors.As(err, &nf) {
				t.Errorf("table %sworkflow_exec: %v; want none: nothing may be written", prefix, err)
			}
		})
	}
	t.Run("start/dynamodb", func(t *testing.T) {
		t.Parallel()
		prefix := dynamotest.Prefix(t)
		st := dynamotest.NewStore(t, dynamodb.Options{Prefix: prefix})
		env := dynamotest.Env(t, prefix)
		paramsFile := filepath.Join(t.TempDir(), "params.json")
		if err := os.WriteFile(paramsFile, []byte(`{"date": "2024-01-31", "nope": 3}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := whimbrel(t, env, "start", def, "--params-file", paramsFile)
		if code != 2 || !strings.Contains(errOut, `param "region" is required`) || !strings.Contains(errOut, `param "nope" is not declared`) {
			t.Fatalf("exit %d, want 2 naming region and nope:\n%s", code, errOut)
		}
		wfs, err := st.Workflows(context.Background(), state.WorkflowQuery{})
		if err != nil || len(wfs) != 0 {
			t.Fatalf("executions after a refused start: %d (%v); want none", len(wfs), err)
		}
		out, errOut, code := whimbrel(t, env, "start", def, "--params-file", paramsFile, "--param", "region=eu", "--param", "nope=")
		if code != 2 || !strings.Contains(errOut, `param "nope" is not declared`) {
			t.Fatalf("exit %d, want 2 naming nope:\n%s\n%s", code, out, errOut)
		}
	})
}

const progressWorkflow = `
name: data-progress
activities:
  slow:
    heartbeat_interval: 200ms
    heartbeat_timeout: 3s
    env:
      RELEASE: %q
    command:
      - sh
      - -c
      - |
        echo '{"done": 1, "of": 3}' > "$WHIMBREL_PROGRESS.tmp" && mv "$WHIMBREL_PROGRESS.tmp" "$WHIMBREL_PROGRESS"
        while [ ! -e "$RELEASE" ]; do sleep 0.05; done
        echo 'all done' > "$WHIMBREL_PROGRESS"
`

// TestProgressShowsWhileRunning: what the command writes to
// WHIMBREL_PROGRESS reaches status, with its age, while the activity
// runs; the last progress is kept with the outcome.
func TestProgressShowsWhileRunning(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			release := filepath.Join(t.TempDir(), "release")
			def := writeDefinition(t, fmt.Sprintf(progressWorkflow, release))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, binary, "run", def)
			run.Dir = dir
			run.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
			var runOut bytes.Buffer
			run.Stdout, run.Stderr = &runOut, &runOut
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			var runErr error
			go func() { runErr = run.Wait(); close(done) }()
			t.Cleanup(func() {
				_ = os.WriteFile(release, nil, 0o600)
				select {
				case <-done:
				case <-time.After(time.Minute):
					_ = run.Process.Kill()
				}
			})

			var id string
			found := false
			deadline := time.Now().Add(time.Minute)
			for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				if id == "" {
					if _, err := os.Stat(filepath.Join(dir, ".whimbrel", "state.db")); name == "sqlite" && err != nil {
						continue
					}
					st := openStore(t, dir, env)
					wfs, err := st.Workflows(ctx, state.WorkflowQuery{Name: "data-progress"})
					if err != nil || len(wfs) == 0 {
						continue
					}
					id = wfs[0].WorkflowExecID
				}
				a := activityOf(t, statusJSON(t, dir, env, id), "slow")
				if len(a.Progress) == 0 {
					continue
				}
				if a.State != state.Running {
					t.Fatalf("slow is %s; the progress should show while it runs", a.State)
				}
				sameJSON(t, "progress", a.Progress, `{"done": 1, "of": 3}`)
				if a.ProgressAge == nil || *a.ProgressAge < 0 || *a.ProgressAge > 30 || a.ProgressTime == nil {
					t.Errorf("progress age %s at %v; want a few seconds at most", fmtAge(a.ProgressAge), a.ProgressTime)
				}
				text, _, _ := whimbrel(t, env, append(append([]string{"status"}, storeArgs(dir, env)...), id)...)
				if !strings.Contains(text, `progress: {"done": 1, "of": 3} (`) || !strings.Contains(text, "ago)") {
					t.Errorf("status text lacks the progress and its age:\n%s", text)
				}
				found = true
				break
			}
			if t.Failed() {
				return
			}
			if !found {
				t.Fatalf("no progress in status within a minute\n%s", runOut.String())
			}
			if err := os.WriteFile(release, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
				if runErr != nil {
					t.Fatalf("whimbrel run: %v\n%s", runErr, runOut.String())
				}
			case <-time.After(time.Minute):
				t.Fatal("whimbrel run did not end")
			}
			a := activityOf(t, statusJSON(t, dir, env, id), "slow")
			if a.State != state.Completed {
				t.Fatalf("slow is %s: %s", a.State, a.Reason)
			}
			sameJSON(t, "final progress", a.Progress, `"all done"`)
		})
	}
}

func fmtAge(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.3fs", *p)
}

const retriedDataWorkflow = `
name: data-retried
activities:
  first:
    retry: {max_attempts: 2, interval: 100ms}
    command:
      - sh
      - -c
      - |
        if grep -q '"previous_progress":"half way"' "$WHIMBREL_INPUTS"; then
          echo '{"n": 7}' > "$WHIMBREL_OUTPUT"
          exit 0
        fi
        echo "half way" > "$WHIMBREL_PROGRESS"
        sleep 1.5
        exit 1
    heartbeat_interval: 200ms
    heartbeat_timeout: 2s
  second:
    depends_on: [first]
    command: ["sh", "-c", "echo '{\"got\": {{ outputs.first.n }}}' > \"$WHIMBREL_OUTPUT\""]
`

// TestRunRetriedActivityHandsOverData: a retry reads the progress of the
// attempt it retries through WHIMBREL_INPUTS' previous_progress, and the
// activity downstream gets the output of the attempt that completed, not
// of the first one (each attempt is its own item).
func TestRunRetriedActivityHandsOverData(t *testing.T) {
	t.Parallel()
	def := writeDefinition(t, retriedDataWorkflow)
	for name, env := range withProcess(stores(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runIn(t, dir, env, def)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			id := onlyExecution(t, openStore(t, dir, env), "data-retried")
			s := statusJSON(t, dir, env, id)
			first := activityOf(t, s, "first")
			if first.Attempt != 2 {
				t.Errorf("first ended on attempt %d, want 2 (the retry saw the first attempt's progress)", first.Attempt)
			}
			sameJSON(t, "first's output", first.Output, `{"n": 7}`)
			sameJSON(t, "second's output", activityOf(t, s, "second").Output, `{"got": 7}`)
		})
	}
}
