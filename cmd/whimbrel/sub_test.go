package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state"
)

// writeFiles writes the named files into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// childrenOf lists the child workflows of the named workflow's executions,
// by their parent activity's ID, read from the store.
func childrenOf(t *testing.T, st state.Store, childName string) []*state.WorkflowExec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wfs, err := st.Workflows(ctx, state.WorkflowQuery{Name: childName})
	if err != nil {
		t.Fatal(err)
	}
	var out []*state.WorkflowExec
	for _, w := range wfs {
		full, err := st.GetWorkflow(ctx, w.WorkflowExecID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full)
	}
	return out
}

// onlyWorkflow is the one execution of the named workflow.
func onlyWorkflow(t *testing.T, st state.Store, name string) *state.WorkflowExec {
	t.Helper()
	wfs := childrenOf(t, st, name)
	if len(wfs) != 1 {
		t.Fatalf("%d executions of %s, want 1", len(wfs), name)
	}
	return wfs[0]
}

// TestRunSubWorkflowExample: examples/parent.yaml runs examples/ingest.yaml
// twice as child workflows, on both stores: each child is an execution
// of its own that names its parent, each parent activity is COMPLETED
// with its child's declared outputs, and publish reads them.
func TestRunSubWorkflowExample(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out, errOut, code := runIn(t, dir, env, example(t, "parent.yaml"))
			if code != 0 || !strings.Contains(out, "COMPLETED in") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			st := openStore(t, dir, env)
			parent := onlyWorkflow(t, st, "nightly")
			children := childrenOf(t, st, "ingest")
			if len(children) != 2 {
				t.Fatalf("%d ingest executions, want 2", len(children))
			}
			ctx := context.Background()
			for _, c := range children {
				if c.State != state.WorkflowCompleted || c.ParentWorkflowExecID != parent.WorkflowExecID {
					t.Errorf("child %s: %s, parent %q; want COMPLETED, parent %s", c.WorkflowExecID, c.State, c.ParentWorkflowExecID, parent.WorkflowExecID)
				}
				p, err := st.GetActivity(ctx, c.Parent.Key())
				if err != nil {
					t.Fatal(err)
				}
				if p.State != state.Completed || p.LaunchedAs != c.WorkflowExecID || p.HeartbeatEnabled {
					t.Errorf("parent activity %s: %s, launched as %q, heartbeats %v; want COMPLETED, launched as %s, no heartbeats", p.ActivityExecID, p.State, p.LaunchedAs, p.HeartbeatEnabled, c.WorkflowExecID)
				}
				var got map[string]string
				if err := json.Unmarshal([]byte(p.Output), &got); err != nil || got["rows"] != "42" || !strings.HasPrefix(p.ActivityName, "ingest-"+got["source"]) {
					t.Errorf("parent activity %s output %q, want rows 42 and its source", p.ActivityName, p.Output)
				}
				acts, err := st.Activities(ctx, c.WorkflowExecID)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range acts {
					if a.Parent != c.Parent {
						t.Errorf("child activity %s names parent %+v, want %+v", a.ActivityExecID, a.Parent, c.Parent)
					}
				}
			}
			logs, _ := filepath.Glob(filepath.Join(dir, ".whimbrel", "logs", "*", "publish*"))
			var publish []byte
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				publish = append(publish, b...)
			}
			if !bytes.Contains(publish, []byte("publishing 42 + 42 rows")) {
				t.Errorf("publish did not read the children's outputs:\n%s", publish)
			}
			for _, c := range children {
				if !strings.Contains(out, "child "+c.WorkflowExecID) {
					t.Errorf("whimbrel run's view does not name child %s:\n%s", c.WorkflowExecID, out)
				}
			}
			// The views: one row per child with its ID to follow; the
			// tree in place; the child names its parent.
			status, _, code := whimbrelIn(t, dir, env, "status", parent.WorkflowExecID)
			tree, _, code2 := whimbrelIn(t, dir, env, "status", "--tree", parent.WorkflowExecID)
			childStatus, _, code3 := whimbrelIn(t, dir, env, "status", children[0].WorkflowExecID)
			if code+code2+code3 != 0 {
				t.Fatalf("status exits %d %d %d", code, code2, code3)
			}
			for _, c := range children {
				if !strings.Contains(status, "child workflow "+c.WorkflowExecID+" (whimbrel status "+c.WorkflowExecID+")") {
					t.Errorf("status does not name child %s:\n%s", c.WorkflowExecID, status)
				}
				if !strings.Contains(tree, "│ workflow "+c.WorkflowExecID+"  COMPLETED") {
					t.Errorf("status --tree does not expand child %s:\n%s", c.WorkflowExecID, tree)
				}
			}
			if strings.Count(tree, "│   load") != 2 {
				t.Errorf("status --tree does not show the children's activities:\n%s", tree)
			}
			if !strings.Contains(childStatus, "child of "+parent.WorkflowExecID+", activity ") {
				t.Errorf("the child's status does not name its parent:\n%s", childStatus)
			}
		})
	}
}

// TestRunSubWorkflowFailsAndRetries: a child that fails fails its parent
// activity, whose retry policy starts a second child (a new attempt);
// both children stay visible, each naming its own attempt.
func TestRunSubWorkflowFailsAndRetries(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{
				"parent.yaml": `name: parent
activities:
  run-child:
    workflow: child.yaml
    retry: {max_attempts: 2, interval: 1s}
  after:
    depends_on: [run-child]
    command: ["true"]
`,
				"child.yaml": `name: child
activities:
  boom:
    command: ["sh", "-c", "echo broken >&2; exit 3"]
`,
			})
			out, errOut, code := runIn(t, dir, env, filepath.Join(dir, "parent.yaml"))
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			st := openStore(t, dir, env)
			parent := onlyWorkflow(t, st, "parent")
			if parent.State != state.WorkflowFailed {
				t.Errorf("parent is %s, want FAILED", parent.State)
			}
			children := childrenOf(t, st, "child")
			if len(children) != 2 {
				t.Fatalf("%d child executions, want 2 (one per attempt)", len(children))
			}
			attempts := map[int]string{}
			for _, c := range children {
				if c.State != state.WorkflowFailed {
					t.Errorf("child %s is %s, want FAILED", c.WorkflowExecID, c.State)
				}
				p, err := st.GetActivity(context.Background(), c.Parent.Key())
				if err != nil {
					t.Fatal(err)
				}
				if p.State != state.Failed || p.LaunchedAs != c.WorkflowExecID || !strings.Contains(p.Error, "FAILED") {
					t.Errorf("attempt %d: %s, launched as %q, error %q; want FAILED by its child %s", p.Attempt, p.State, p.LaunchedAs, p.Error, c.WorkflowExecID)
				}
				attempts[p.Attempt] = c.WorkflowExecID
			}
			if attempts[1] == "" || attempts[2] == "" {
				t.Errorf("children by attempt: %v, want attempts 1 and 2", attempts)
			}
		})
	}
}

// TestRunSubWorkflowCancel: cancelling the parent while its child runs
// cancels the child, and the child's running command is stopped.
func TestRunSubWorkflowCancel(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			writeFiles(t, dir, map[string]string{
				"parent.yaml": `name: parent
activities:
  run-child:
    workflow: child.yaml
`,
				"child.yaml": `name: child
defaults: {heartbeat_interval: 1s, heartbeat_timeout: 10s}
activities:
  slow:
    command: ["sh", "-c", "echo $$ > ` + pidFile + `; exec sleep 300"]
`,
			})
			cmd := exec.Command(binary, "run", filepath.Join(dir, "parent.yaml"))
			cmd.Dir = dir
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			pid := readPIDFile(t, pidFile)
			st := openStore(t, dir, env)
			parent := onlyWorkflow(t, st, "parent")
			if o, e, code := whimbrelIn(t, dir, env, "cancel", parent.WorkflowExecID); code != 0 {
				t.Fatalf("cancel: exit %d\n%s%s", code, o, e)
			}
			select {
			case <-done:
			case <-time.After(90 * time.Second):
				t.Fatalf("whimbrel run did not end after the cancel:\n%s", out.String())
			}
			child := onlyWorkflow(t, st, "child")
			if child.State != state.WorkflowCancelled {
				t.Errorf("child is %s, want CANCELLED", child.State)
			}
			slow, err := st.GetActivity(context.Background(), state.ActivityKey{ActivityExecID: state.ActivityExecIDFor(child.WorkflowExecID, "slow"), WorkflowExecID: child.WorkflowExecID})
			if err != nil {
				t.Fatal(err)
			}
			if slow.State != state.CancelledRunning {
				t.Errorf("the child's activity is %s, want CANCELLED_RUNNING", slow.State)
			}
			p, err := st.GetActivity(context.Background(), child.Parent.Key())
			if err != nil {
				t.Fatal(err)
			}
			if p.State != state.CancelledRunning {
				t.Errorf("the parent activity is %s, want CANCELLED_RUNNING", p.State)
			}
			deadline := time.Now().Add(60 * time.Second)
			for syscall.Kill(pid, 0) == nil {
				if time.Now().After(deadline) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatalf("the child's command %d is still running", pid)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestRunSubWorkflowKillWrapper: kill -9 of the wrapper of the child's
// last activity. The monitor times the activity out, its retry completes,
// the child settles, and the parent goes on: its next activity runs
// exactly once. The activities have wrappers (--supervise process).
func TestRunSubWorkflowKillWrapper(t *testing.T) {
	t.Parallel()
	for name, env := range stores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile, marker, ran := filepath.Join(dir, "wrapper-pid"), filepath.Join(dir, "first"), filepath.Join(dir, "ran")
			writeFiles(t, dir, map[string]string{
				"parent.yaml": `name: parent
activities:
  run-child:
    workflow: child.yaml
  after:
    depends_on: [run-child]
    command: ["sh", "-c", "echo once >> ` + ran + `"]
`,
				"child.yaml": `name: child
activities:
  first:
    command: ["true"]
  last:
    depends_on: [first]
    heartbeat_interval: 1s
    heartbeat_timeout: 3s
    retry: {max_attempts: 2, interval: 1s}
    command: ["sh", "-c", "if [ ! -e ` + marker + ` ]; then touch ` + marker + `; echo $PPID > ` + pidFile + `; exec sleep 300; fi"]
`,
			})
			cmd := exec.Command(binary, "run", "--supervise", "process", filepath.Join(dir, "parent.yaml"))
			cmd.Dir = dir
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			wrapper := readPIDFile(t, pidFile)
			if err := syscall.Kill(wrapper, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("whimbrel run: %v\n%s", err, out.String())
				}
			case <-time.After(150 * time.Second):
				t.Fatalf("whimbrel run did not end:\n%s", out.String())
			}
			st := openStore(t, dir, env)
			if p := onlyWorkflow(t, st, "parent"); p.State != state.WorkflowCompleted {
				t.Errorf("parent is %s, want COMPLETED", p.State)
			}
			child := onlyWorkflow(t, st, "child")
			if child.State != state.WorkflowCompleted {
				t.Errorf("child is %s, want COMPLETED", child.State)
			}
			acts, err := st.Activities(context.Background(), child.WorkflowExecID)
			if err != nil {
				t.Fatal(err)
			}
			timedOut := 0
			for _, a := range acts {
				if a.ActivityName == "last" && a.State == state.TimedOut {
					timedOut++
				}
			}
			if timedOut != 1 {
				t.Errorf("%d timed-out attempts of the child's last activity, want 1", timedOut)
			}
			if b, _ := os.ReadFile(ran); string(b) != "once\n" {
				t.Errorf("the parent's next activity ran %q, want once", b)
			}
		})
	}
}

// TestRunSubWorkflowRefusesCycleAndDepth: a definition that includes
// itself through another, and one nesting deeper than the cap, are
// refused when read, naming the chain; nothing is started.
func TestRunSubWorkflowRefusesCycleAndDepth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"a.yaml": "name: a\nactivities:\n  x: {workflow: b.yaml}\n",
		"b.yaml": "name: b\nactivities:\n  y: {workflow: a.yaml}\n",
	}
	for i := 1; i <= 6; i++ {
		next := "  x: {workflow: d" + string(rune('0'+i+1)) + ".yaml}\n"
		if i == 6 {
			next = "  x: {command: [\"true\"]}\n"
		}
		files["d"+string(rune('0'+i))+".yaml"] = "name: d" + string(rune('0'+i)) + "\nactivities:\n" + next
	}
	writeFiles(t, dir, files)
	for _, c := range []struct {
		file string
		want []string
	}{
		{"a.yaml", []string{"includes itself", "a.yaml → " + filepath.Join(dir, "b.yaml") + " → " + filepath.Join(dir, "a.yaml")}},
		{"d1.yaml", []string{"nest 6 deep, more than 5", "d1.yaml → ", "d6.yaml"}},
	} {
		out, errOut, code := runIn(t, dir, nil, filepath.Join(dir, c.file))
		if code == 0 {
			t.Errorf("%s: exit 0, want a refusal\n%s", c.file, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.file, w, errOut)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, ".whimbrel", "state.db")); err == nil {
			t.Errorf("%s: a store was created for a refused definition", c.file)
		}
	}
}

// TestRunRegisteredChild: a child named by registration (workflow:
// {name: N}) is read from the store when the parent starts and stored
// with it; registered definitions that include each other are refused
// naming the chain.
func TestRunRegisteredChild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"parent.yaml": "name: parent\nactivities:\n  run: {workflow: {name: child}}\n",
		"child.yaml":  "name: child\noutputs: {n: \"{{ outputs.one.n }}\"}\nactivities:\n  one: {command: [\"sh\", \"-c\", \"echo '{\\\"n\\\": 5}' > $WHIMBREL_OUTPUT\"]}\n",
		"loop.yaml":   "name: loop\nactivities:\n  run: {workflow: {name: ring}}\n",
		"ring.yaml":   "name: ring\nactivities:\n  back: {workflow: {name: loop}}\n",
		"top.yaml":    "name: top\nactivities:\n  run: {workflow: {name: loop}}\n",
	})
	if err := os.MkdirAll(filepath.Join(dir, ".whimbrel"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(dir, ".whimbrel", "state.db")}
	for _, f := range []string{"child.yaml", "loop.yaml", "ring.yaml"} {
		if out, errOut, code := whimbrelIn(t, dir, env, "register", filepath.Join(dir, f)); code != 0 {
			t.Fatalf("register %s: exit %d\n%s%s", f, code, out, errOut)
		}
	}
	out, errOut, code := runIn(t, dir, nil, filepath.Join(dir, "parent.yaml"))
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	st := openStore(t, dir, nil)
	child := onlyWorkflow(t, st, "child")
	p, err := st.GetActivity(context.Background(), child.Parent.Key())
	if err != nil || p.State != state.Completed || p.Output != `{"n":"5"}` {
		t.Errorf("parent activity %+v %v, want COMPLETED with output {\"n\":\"5\"}", p, err)
	}
	_, errOut, code = runIn(t, dir, nil, filepath.Join(dir, "top.yaml"))
	if code == 0 || !strings.Contains(errOut, "top → loop → ring → loop") {
		t.Errorf("exit %d, want a refusal naming top → loop → ring → loop:\n%s", code, errOut)
	}
}
