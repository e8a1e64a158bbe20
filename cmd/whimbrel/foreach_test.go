package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// The end-to-end tests of for_each run `whimbrel run` (supervising inline,
// its default) running real commands: on the embedded store, on DynamoDB
// Local, and on DynamoDB Local behind the fault proxy (indexes that lag,
// throttling, errors after a write applied, small pages), and once with a
// whimbrel-run process each on the embedded store.

// forEachStores are the stores the for_each tests run on.
func forEachStores(t *testing.T) map[string][]string {
	t.Helper()
	out := stores(t)
	prefix := dynamotest.Prefix(t)
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{
		IndexLag: 300 * time.Millisecond, Throttle: 0.02, Errors: 0.02, AfterWrite: 0.5, PageSize: 7,
	})
	st := dynamodb.New(proxy.Client(false), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatalf("install tables: %v", err)
	}
	out["faults"] = proxy.Env(t, prefix)
	return out
}

// logLines reads the lines the commands appended to path, sorted.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(lines)
	return lines
}

const forEachWorkflow = `
name: fe-all
params:
  log: {required: true}
  names: {default: '["x", "y"]'}
activities:
  list:
    command: ["sh", "-c", "echo '{\"files\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}' > \"$WHIMBREL_OUTPUT\""]
  convert:
    depends_on: [list]
    for_each: "{{ outputs.list.files }}"
    max_running: 2
    tolerated_failures: 1
    retry: {max_attempts: 2, interval: 1s}
    env: {LOG: "{{ params.log }}"}
    command:
      - sh
      - -c
      - |
        echo "convert $0 $WHIMBREL_ITEM_INDEX $WHIMBREL_ITEM" >> "$LOG"
        if [ "$0" = b ] && [ ! -e "$LOG.b" ]; then touch "$LOG.b"; exit 3; fi
        if [ "$0" = e ]; then exit 4; fi
        echo "{\"up\": \"$0$0\"}" > "$WHIMBREL_OUTPUT"
      - "{{ item }}"
  merge:
    depends_on: [convert]
    env: {LOG: "{{ params.log }}", FILE: "{{ outputs.convert.outputs_file }}", N: "{{ outputs.convert.items }}/{{ outputs.convert.completed }}/{{ outputs.convert.failed }}"}
    command: ["sh", "-c", "cp \"$FILE\" \"$LOG.merged\"; echo \"merge $N\" >> \"$LOG\""]
  again:
    depends_on: [convert]
    for_each: {count: "{{ outputs.convert.completed }}"}
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"again $0\" >> \"$LOG\"", "{{ item_index }}"]
  byparam:
    for_each: "{{ params.names }}"
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"byparam $0\" >> \"$LOG\"", "{{ item }}"]
  inline:
    for_each: [{k: one}, {k: two}]
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"inline $0\" >> \"$LOG\"", "{{ item.k }}"]
  empty:
    for_each: "[]"
    command: ["true"]
  after-empty:
    depends_on: [empty]
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"after-empty {{ outputs.empty.items }}\" >> \"$LOG\""]
`

// TestForEach: lists from an upstream's output, a parameter and inline, a
// count, an empty list, an element retried, a failure within the
// tolerance, and a map whose downstream is a map; every element's command
// runs once (the retried one twice), and the downstream reads the
// elements' outputs in index order.
func TestForEach(t *testing.T) {
	t.Parallel()
	for name, env := range withProcess(forEachStores(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			out, errOut, code := runIn(t, dir, env, writeDefinition(t, forEachWorkflow), "--param", "log="+log)
			if code != 0 || !strings.Contains(out, "COMPLETED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			want := []string{
				"after-empty 0",
				"again 0", "again 1", "again 2", "again 3",
				"byparam x", "byparam y",
				"convert a 0 \"a\"", "convert b 1 \"b\"", "convert b 1 \"b\"", "convert c 2 \"c\"",
				"convert d 3 \"d\"", "convert e 4 \"e\"", "convert e 4 \"e\"",
				"inline one", "inline two",
				"merge 5/4/1",
			}
			if got := logLines(t, log); !slices.Equal(got, want) {
				t.Errorf("the commands ran as\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			merged, err := os.ReadFile(log + ".merged")
			if err != nil {
				t.Fatal(err)
			}
			wantMerged := "{\"up\":\"aa\"}\n{\"up\":\"bb\"}\n{\"up\":\"cc\"}\n{\"up\":\"dd\"}\nnull\n"
			if string(merged) != wantMerged {
				t.Errorf("outputs_file holds\n%s\nwant\n%s", merged, wantMerged)
			}
			st := openStore(t, dir, env)
			id := onlyExecution(t, st, "fe-all")
			checkSupervised(t, st, name, id)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := st.GetActivity(ctx, state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(id, "convert"), WorkflowExecID: id})
			if err != nil {
				t.Fatal(err)
			}
			if m.State != state.Completed || !strings.Contains(m.Reason, "4 of 5 elements completed; 1 failed, within the 1 tolerated") {
				t.Errorf("the map is %s (%s), want COMPLETED with 1 failure tolerated", m.State, m.Reason)
			}
			sameJSON(t, "the map's output", []byte(m.Output), `{"items": 5, "completed": 4, "failed": 1}`)
			// The views: one row per map with its counts, and its elements
			// on demand.
			if !regexp.MustCompile(`convert +▶ 4/5 completed · 1 failed`).MatchString(out) || regexp.MustCompile(`convert +RUNNING`).FindAllString(out, -1) == nil ||
				len(regexp.MustCompile(`convert +COMPLETED`).FindAllString(out, -1)) != 1 {
				t.Errorf("whimbrel run does not show the map as one row with its counts:\n%s", out)
			}
			sargs := append([]string{"status"}, storeArgs(dir, env)...)
			status, errOut, code := whimbrel(t, env, append(sargs, id)...)
			if code != 0 || !strings.Contains(status, "▶ 4/5 completed · 1 failed") {
				t.Errorf("status: exit %d\n%s%s", code, status, errOut)
			}
			items, errOut, code := whimbrel(t, env, append(sargs, id, "--items", "--state", "FAILED", "--activity", "convert")...)
			if code != 0 || !strings.Contains(items, "convert: 1 elements, page 1 of 1") || !strings.Contains(items, "convert[4]") || strings.Contains(items, "convert[3]") {
				t.Errorf("status --items --state FAILED: exit %d\n%s%s", code, items, errOut)
			}
			s := statusJSON(t, dir, env, id)
			if c := activityOf(t, s, "convert").Map; c == nil || c.Completed != 4 || c.Failed != 1 || c.Items != 5 {
				t.Errorf("status --json: the map's counts are %+v", c)
			}
		})
	}
}

const forEachOverTolerance = `
name: fe-over
params:
  log: {required: true}
activities:
  convert:
    for_each: {count: 30}
    max_running: 2
    tolerated_failures: 10%
    env: {LOG: "{{ params.log }}"}
    command: ["sh", "-c", "echo \"$0\" >> \"$LOG\"; case $0 in 3|4|5|6) exit 1;; esac", "{{ item_index }}"]
  merge:
    depends_on: [convert]
    command: ["true"]
  bad:
    for_each: "{{ params.log }}"
    command: ["true"]
`

// TestForEachOverTolerance: more failures than tolerated stop the map:
// no element starts after, those not started are cancelled, and the map
// fails naming the count and the first failed elements; its downstream is
// cancelled. A for_each that is not a list fails its map naming the
// value, with no element written.
func TestForEachOverTolerance(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			out, errOut, code := runIn(t, dir, env, writeDefinition(t, forEachOverTolerance), "--param", "log="+log)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			ran := logLines(t, log)
			// 10% of 30 is 3: the fourth failure (element 6) stops the
			// map; with two at once, at most one more starts beside it.
			if len(ran) < 7 || len(ran) > 9 {
				t.Errorf("%d elements ran (%v), want 7 to 9", len(ran), ran)
			}
			st := openStore(t, dir, env)
			id := onlyExecution(t, st, "fe-over")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			acts, err := st.Activities(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]state.ActivityState{}
			items := map[state.ActivityState]int{}
			for _, a := range acts {
				if a.ItemIndex != nil {
					if a.ActivityName == "bad" {
						t.Errorf("an element of the bad map was written: %s", a.ActivityExecID)
					}
					items[a.State]++
					continue
				}
				states[a.ActivityName] = a.State
				switch a.ActivityName {
				case "convert":
					if !strings.Contains(a.Reason, "4 of 30 elements failed, more than the 3 tolerated: convert[3], convert[4], convert[5], convert[6]") {
						t.Errorf("the map's reason is %q", a.Reason)
					}
				case "bad":
					if !strings.Contains(a.Reason, "not a JSON list") || !strings.Contains(a.Reason, log) {
						t.Errorf("the bad map's reason is %q, want one naming the value", a.Reason)
					}
				}
			}
			if states["convert"] != state.Failed || states["merge"] != state.Cancelled || states["bad"] != state.Failed {
				t.Errorf("states %v, want convert and bad FAILED, merge CANCELLED", states)
			}
			if items[state.Completed]+items[state.Failed] != len(ran) || items[state.Failed] != 4 {
				t.Errorf("elements %v, want 4 FAILED and %d ended in all", items, len(ran))
			}
			if items[state.Running]+items[state.Ready]+items[state.Queued] != 0 {
				t.Errorf("elements %v: some did not end", items)
			}
		})
	}
}

// fleetStores are the stores the fleet tests run on, each as the
// environment every process of the fleet shares.
func fleetStores(t *testing.T) map[string][]string {
	t.Helper()
	prefix := dynamotest.Prefix(t)
	env := dynamotest.Env(t, prefix)
	if _, errOut, code := whimbrel(t, env, "install"); code != 0 {
		t.Fatalf("install: exit %d\n%s", code, errOut)
	}
	return map[string][]string{
		"sqlite":   {"WHIMBREL_STORE=sqlite:" + filepath.Join(t.TempDir(), "state.db")},
		"dynamodb": env,
	}
}

// startFleet starts a workflow, then n launchers and a monitor, until
// the test ends; it returns the execution's ID.
func startFleet(t *testing.T, env []string, def string, n int, params ...string) string {
	t.Helper()
	args := []string{"start", writeDefinition(t, def)}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	if strings.HasPrefix(env[0], "WHIMBREL_STORE=sqlite:") {
		args = append(args, "--detach") // else it runs to its end here
	}
	out, errOut, code := whimbrel(t, env, args...)
	if code != 0 {
		t.Fatalf("start: exit %d\n%s", code, errOut)
	}
	id := strings.Fields(out + " ")[0]
	for range n {
		launcherFor(t, env)
	}
	mon := exec.Command(filepath.Join(filepath.Dir(binary), "whimbrel-monitor"), "--interval", "1s")
	mon.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mon.Process.Kill(); _ = mon.Wait() })
	return id
}

// settled waits until the execution settled, and returns its items.
func settledExec(t *testing.T, st state.Store, id string, sample func([]*state.ActivityExec)) (*state.WorkflowExec, []*state.ActivityExec) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		wf, err := st.GetWorkflow(ctx, id)
		var acts []*state.ActivityExec
		if err == nil {
			acts, err = st.Activities(ctx, id)
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if sample != nil {
			sample(acts)
		}
		if wf.State.Terminal() {
			return wf, acts
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s after 4 minutes", id, wf.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const forEachMaxRunning = `
name: fe-max
params:
  dir: {required: true}
activities:
  convert:
    for_each: {count: 24}
    max_running: 3
    env: {DIR: "{{ params.dir }}"}
    command:
      - sh
      - -c
      - |
        touch "$DIR/run.$0"
        ls "$DIR" | grep -c '^run\.' >> "$DIR/samples"
        sleep 0.3
        rm "$DIR/run.$0"
        echo "$0" >> "$DIR/log"
      - "{{ item_index }}"
`

// TestForEachMaxRunning: max_running 3 holds under 4 launchers: each
// element's command counts the commands running as it starts, and the
// store is sampled all along for elements QUEUED or RUNNING.
func TestForEachMaxRunning(t *testing.T) {
	t.Parallel()
	for name, env := range fleetStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := startFleet(t, env, forEachMaxRunning, 4, "dir="+dir)
			st := fleetStore(t, env)
			most := 0
			wf, _ := settledExec(t, st, id, func(acts []*state.ActivityExec) {
				live := 0
				for _, a := range acts {
					if a.ItemIndex != nil && (a.State == state.Queued || a.State == state.Running || a.State == state.Preparing) {
						live++
					}
				}
				most = max(most, live)
			})
			if wf.State != state.WorkflowCompleted {
				t.Fatalf("%s is %s: %s", id, wf.State, wf.Reason)
			}
			if most > 3 {
				t.Errorf("the store held %d elements queued or running at once, more than max_running 3", most)
			}
			for _, s := range logLines(t, filepath.Join(dir, "samples")) {
				if n, _ := strconv.Atoi(s); n > 3 || n < 1 {
					t.Errorf("a command started beside %d running, more than max_running 3", n)
				}
			}
			if got := logLines(t, filepath.Join(dir, "log")); len(got) != 24 || len(slices.Compact(got)) != 24 {
				t.Errorf("the elements ran as %v, want each of 24 once", got)
			}
			t.Logf("at most %d elements queued or running in the store's samples", most)
		})
	}
}

const forEachCancel = `
name: fe-cancel
params:
  dir: {required: true}
activities:
  convert:
    for_each: {count: 40}
    max_running: 4
    env: {DIR: "{{ params.dir }}"}
    command: ["sh", "-c", "echo \"$0\" >> \"$DIR/log\"; sleep 3", "{{ item_index }}"]
  merge:
    depends_on: [convert]
    command: ["true"]
`

// TestForEachCancel: a cancel in the middle of a map reaches every
// element: the running ones are stopped, the others cancelled, and none
// starts after.
func TestForEachCancel(t *testing.T) {
	t.Parallel()
	for name, env := range fleetStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := startFleet(t, env, forEachCancel, 2, "dir="+dir)
			log := filepath.Join(dir, "log")
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if b, _ := os.ReadFile(log); strings.Count(string(b), "\n") >= 5 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("fewer than 5 elements started within 2 minutes")
				}
				time.Sleep(100 * time.Millisecond)
			}
			if _, errOut, code := whimbrel(t, env, "cancel", id); code != 0 {
				t.Fatalf("cancel: exit %d\n%s", code, errOut)
			}
			st := fleetStore(t, env)
			wf, _ := settledExec(t, st, id, nil)
			if wf.State != state.WorkflowCancelled {
				t.Fatalf("%s is %s, want CANCELLED", id, wf.State)
			}
			ranAtCancel := len(logLines(t, log))
			time.Sleep(5 * time.Second) // what could still start, would
			_, acts := settledExec(t, st, id, nil)
			if ran := len(logLines(t, log)); ran != ranAtCancel || ran >= 40 {
				t.Errorf("%d elements ran by the cancel's end, %d five seconds later (of 40)", ranAtCancel, ran)
			}
			for _, a := range acts {
				if !a.State.Terminal() || a.State == state.Completed && a.ItemIndex == nil {
					t.Errorf("%s (%s) is %s after the cancel", a.ActivityName, a.ActivityExecID, a.State)
				}
			}
		})
	}
}

// fleetStore opens the store of a fleet's environment.
func fleetStore(t *testing.T, env []string) state.Store {
	t.Helper()
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "WHIMBREL_STORE=sqlite:"); ok {
			st, err := sqlite.Open(p, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}
	}
	return openStore(t, "", env)
}

const forEachRedrive = `
name: fe-redrive
params:
  dir: {required: true}
activities:
  convert:
    for_each: {count: 10}
    env: {DIR: "{{ params.dir }}"}
    command:
      - sh
      - -c
      - |
        echo "$0" >> "$DIR/log"
        if [ "$0" = 3 ] || [ "$0" = 7 ]; then test -e "$DIR/mark.$0" || { touch "$DIR/mark.$0"; i=0; while [ "$(wc -l < "$DIR/log")" -lt 10 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exit 1; }; fi
        echo "{\"i\": $0}" > "$WHIMBREL_OUTPUT"
      - "{{ item_index }}"
  merge:
    depends_on: [convert]
    env: {DIR: "{{ params.dir }}", F: "{{ outputs.convert.outputs_file }}"}
    command: ["sh", "-c", "cp \"$F\" \"$DIR/merged.$(ls \"$DIR\" | grep -c merged)\"; test -e \"$DIR/mark.merge\" || { touch \"$DIR/mark.merge\"; exit 1; }"]
`

// TestForEachRerunFromFailure: a redrive inside a map runs only the
// elements that did not complete (the others are carried, outputs and
// all), and a redrive of a map that completed carries it whole: its
// downstream still reads every element's output. Elements 3 and 7 fail
// their first attempt only once every element has started, so that the
// map's stop at its first failure cancels none before it ran.
func TestForEachRerunFromFailure(t *testing.T) {
	t.Parallel()
	for name, env := range withProcess(stores(t)) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			log := filepath.Join(data, "log")
			out, errOut, code := runIn(t, dir, env, writeDefinition(t, forEachRedrive), "--param", "dir="+data)
			if code != 1 {
				t.Fatalf("first run: exit %d, want 1\n%s%s", code, out, errOut)
			}
			first := logLines(t, log)
			st := openStore(t, dir, env)
			id := onlyExecution(t, st, "fe-redrive")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			acts, err := st.Activities(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var notCompleted []string
			for _, a := range acts {
				if a.ItemIndex != nil && a.State != state.Completed {
					notCompleted = append(notCompleted, strconv.Itoa(*a.ItemIndex))
				}
			}
			sort.Strings(notCompleted)
			if len(first) != 10 || !slices.Contains(notCompleted, "3") || !slices.Contains(notCompleted, "7") {
				t.Fatalf("first run: %v ran, %v did not complete", first, notCompleted)
			}
			if err := os.Remove(log); err != nil {
				t.Fatal(err)
			}
			rerun := func(id string) string {
				args := append(append([]string{"rerun", "--from-failure"}, storeArgs(dir, env)...), id)
				out, errOut, _ := whimbrelIn(t, dir, env, args...)
				next := regexp.MustCompile(`fe-redrive::[0-9a-f-]{36}`).FindAllString(out+errOut, -1)
				for _, n := range next {
					if n != id {
						settledExec(t, st, n, nil)
						return n
					}
				}
				t.Fatalf("rerun of %s: no new execution in\n%s%s", id, out, errOut)
				return ""
			}
			if name == "dynamodb" {
				launcherFor(t, env) // on DynamoDB a rerun only starts the execution
			}
			second := rerun(id)
			if got := logLines(t, log); !slices.Equal(got, notCompleted) {
				t.Errorf("the redrive ran %v, want only the elements that did not complete, %v", got, notCompleted)
			}
			third := rerun(second)
			wf, err := st.GetWorkflow(ctx, third)
			if err != nil || wf.State != state.WorkflowCompleted {
				t.Fatalf("the second redrive: %v %v", wf, err)
			}
			if got := logLines(t, log); !slices.Equal(got, notCompleted) {
				t.Errorf("the map carried whole ran elements again: %v", got)
			}
			want := "{\"i\":0}\n{\"i\":1}\n{\"i\":2}\n{\"i\":3}\n{\"i\":4}\n{\"i\":5}\n{\"i\":6}\n{\"i\":7}\n{\"i\":8}\n{\"i\":9}\n"
			for _, f := range []string{"merged.0", "merged.1"} {
				if b, err := os.ReadFile(filepath.Join(data, f)); err != nil || string(b) != want {
					t.Errorf("%s: %q (%v), want every element's output", f, b, err)
				}
			}
		})
	}
}
