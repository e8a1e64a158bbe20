package kubernetes_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/whimbrel/whimbrel/definition"
	"github.com/whimbrel/whimbrel/internal/dynamotest"
	"github.com/whimbrel/whimbrel/internal/k8stest"
	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/internal/launchtest"
	"github.com/whimbrel/whimbrel/launcher/kubernetes"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/dynamodb"
	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/workflow"
)

// dag is a workflow of three Kubernetes activities: extract, then
// transform and report side by side.
const dag = `
name: k8s-dag
defaults:
  launch: {type: kubernetes, image: ` + image + `, namespace: batch, service_account: trainer,
           resources: {requests: {cpu: 500m, memory: 64Mi}, limits: {memory: 64Mi}}, node_selector: {pool: batch}}
  kill_grace: 5s
activities:
  extract: {command: [sh, -c, 'echo extracted']}
  transform: {command: [sh, -c, 'echo transformed'], depends_on: [extract]}
  report: {command: [sh, -c, 'echo "<script>"'], depends_on: [extract]}
`

// startLauncher starts a whimbrel-launcher process serving kubernetes
// through the stand-in, with env to reach the store.
func startLauncher(t *testing.T, srv *k8stest.Server, env []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(launcherBin, "--types", "kubernetes", "--kubeconfig", srv.Kubeconfig(t, "batch"), "--interval", "200ms")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out := &testbin.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("launcher %d:\n%s", cmd.Process.Pid, out.String())
		}
	})
	return cmd
}

// creates counts the Job creates the server answered with code, by Job
// name (from the request's body).
func creates(srv *k8stest.Server, code int) map[string]int {
	out := map[string]int{}
	for _, r := range srv.Requests() {
		if r.Verb != "create" || r.Resource != "jobs" || r.Code != code {
			continue
		}
		var j batchv1.Job
		_ = json.Unmarshal(r.Body, &j)
		out[j.Name]++
	}
	return out
}

// TestDAGUnderThreeLaunchers: three launcher processes, on DynamoDB
// behind the fault proxy, run a DAG of three Kubernetes activities to
// COMPLETED; each activity's Job is created once, as the launch said.
func TestDAGUnderThreeLaunchers(t *testing.T) {
	t.Parallel()
	proxy := dynamotest.NewFaultProxy(t, "", dynamotest.Faults{Throttle: 0.05, Errors: 0.05, AfterWrite: 0.5,
		IndexLag: 300 * time.Millisecond, PartialBatches: true, PageSize: 5})
	prefix := dynamotest.Prefix(t)
	st := dynamodb.New(proxy.Client(true), dynamodb.Options{Prefix: prefix, CallTimeout: dynamotest.CallTimeout})
	if _, err := st.Install(launchtest.Context(t), false); err != nil {
		t.Fatal(err)
	}
	env := proxy.Env(t, prefix)
	srv := newServer(t, env)
	id, _ := launchtest.Start(t, st, dag)
	for i := 0; i < 3; i++ {
		startLauncher(t, srv, env)
	}
	if wf := launchtest.WaitSettled(t, st, id, 2*time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	t.Logf("behind the fault proxy: %s", proxy.Stats())
	made := creates(srv, http.StatusCreated)
	for _, name := range []string{"extract", "transform", "report"} {
		a := launchtest.Activity(t, st, id, name)
		ns, job, _ := strings.Cut(strings.TrimPrefix(a.LaunchedAs, kubernetes.LaunchedAsPrefix), "/")
		if a.LaunchedAs == "" {
			// The launcher records launched_as after the create, on the
			// QUEUED item; a pod whose wrapper claimed and ended first
			// leaves it unrecorded. The Job is found by its name's prefix.
			ns = "batch"
			for j := range made {
				if strings.HasPrefix(j, "wb-"+name+"-") {
					job = j
				}
			}
		}
		if a.State != state.Completed || ns != "batch" || made[job] != 1 {
			t.Errorf("%s: %s, launched as %q; Job created %d times (%v)", name, a.State, a.LaunchedAs, made[job], made)
		}
	}
	if len(made) != 3 {
		t.Errorf("Jobs created: %v, want one for each of the three activities", made)
	}
	// The Job is what the docs say: backoffLimit 0, a TTL, labels, the
	// wrapper's identity in the first container's environment, the pod's
	// grace from kill_grace.
	extract := launchtest.Activity(t, st, id, "extract")
	var job *batchv1.Job
	for _, j := range srv.Jobs() {
		if j.Annotations[kubernetes.AnnotationActivity] == extract.ActivityExecID {
			job = j
		}
	}
	if job == nil {
		t.Fatalf("no Job for %s among %d", extract.ActivityExecID, len(srv.Jobs()))
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	env2 := map[string]string{}
	for _, e := range c.Env {
		env2[e.Name] = e.Value
	}
	if *job.Spec.BackoffLimit != 0 || job.Spec.TTLSecondsAfterFinished == nil || job.Labels[kubernetes.LabelWorkflow] != "k8s-dag" ||
		job.Labels[kubernetes.LabelActivity] != "extract" || env2[state.EnvActivityExecID] != extract.ActivityExecID ||
		env2["WHIMBREL_TABLE_PREFIX"] != prefix || *pod.TerminationGracePeriodSeconds != 15 || pod.ServiceAccountName != "trainer" ||
		pod.NodeSelector["pool"] != "batch" || c.Resources.Requests.Cpu().String() != "500m" || c.Image != image ||
		strings.Join(c.Args, " ") != "sh -c echo extracted" {
		t.Errorf("Job: %+v", job)
	}
}

// TestRepeatedLaunchAfterKill9: a launcher killed (SIGKILL) while its
// create is in flight, after the Job was made, leaves the activity
// QUEUED with a Job that runs it; a repeated launch of the same attempt
// is AlreadyExists and answers the same Job, and no second Job exists.
func TestRepeatedLaunchAfterKill9(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	env := dynamotest.Env(t, st.Prefix())
	srv := newServer(t, env)
	srv.Hang(1)
	id, d := launchtest.Start(t, st, "name: k9\nactivities:\n  a: {command: [sh, -c, 'sleep 1'], launch: {type: kubernetes, image: "+image+"}}\n")
	l := startLauncher(t, srv, env)
	deadline := time.Now().Add(time.Minute)
	for len(srv.Jobs()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the launcher created no Job within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a := launchtest.Activity(t, st, id, "a")
	if a.LaunchedAs != "" {
		t.Fatalf("launched_as %q recorded although the create never answered", a.LaunchedAs)
	}
	// The Job's wrapper runs the activity all the same.
	if wf := launchtest.WaitSettled(t, st, id, time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	j := launcher.Job{Key: a.ActivityKey, WorkflowName: "k9", ActivityName: "a", Command: []string{"true"}, Settings: d.Effective("a")}
	got, err := b.Launch(launchtest.Context(t), j)
	jobs := srv.Jobs()
	if err != nil || len(jobs) != 1 || got != kubernetes.LaunchedAsPrefix+"batch/"+jobs[0].Name {
		t.Fatalf("repeated launch: %q, %v; Jobs %d", got, err, len(jobs))
	}
	if n := creates(srv, http.StatusConflict)[jobs[0].Name]; n != 1 {
		t.Errorf("%d AlreadyExists answers for %s, want 1", n, jobs[0].Name)
	}
}

// TestQuotaForbiddenThenAccepted: on the embedded store, a create refused
// twice for an exhausted quota is retried, under the same name, until it
// is accepted, and the activity completes.
func TestQuotaForbiddenThenAccepted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "state.db")
	st, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Install(launchtest.Context(t), false); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, nil)
	srv.Quota(2)
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := launchtest.Start(t, st, "name: quota\nactivities:\n  a: {command: [sh, -c, 'echo ok'], launch: {type: kubernetes, image: "+image+", retry_for: 1m}}\n")
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchKubernetes: b},
		RetryInterval: 10 * time.Millisecond, StoreEnv: map[string]string{"WHIMBREL_STORE": "sqlite:" + db}})
	if n, err := l.Once(launchtest.Context(t)); n != 1 || err != nil {
		t.Fatalf("Once: %d, %v", n, err)
	}
	if wf := launchtest.WaitSettled(t, st, id, time.Minute); wf.State != state.WorkflowCompleted {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	forbidden, made := creates(srv, http.StatusForbidden), creates(srv, http.StatusCreated)
	if len(made) != 1 || len(forbidden) != 1 {
		t.Fatalf("created %v, forbidden %v", made, forbidden)
	}
	for name, n := range made {
		if n != 1 || forbidden[name] != 2 {
			t.Errorf("Job %s: forbidden %d times, created %d, want 2 and 1", name, forbidden[name], n)
		}
	}
}

// runLauncher runs an in-process launcher with the backend b until the
// test ends.
func runLauncher(t *testing.T, st launcher.Store, b *kubernetes.Backend, storeEnv map[string]string) {
	t.Helper()
	b.TendInterval = 200 * time.Millisecond
	l := launcher.New(st, launcher.Config{Backends: map[string]launcher.Backend{definition.LaunchKubernetes: b},
		Interval: 200 * time.Millisecond, RetryInterval: 10 * time.Millisecond, StoreEnv: storeEnv})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// TestImageNeverPulls: a pod whose image cannot be pulled never starts;
// at the queued timeout the activity fails with what Kubernetes says
// (the container's waiting reason and the pod's events), its Job is
// deleted, and the workflow fails.
func TestImageNeverPulls(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	srv := newServer(t, dynamotest.Env(t, st.Prefix()))
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := launchtest.Start(t, st, "name: pull\nactivities:\n  a:\n    command: [\"true\"]\n    queued_timeout: 3s\n"+
		"    launch: {type: kubernetes, image: registry.example.com/nope:1, retry_for: 1s}\n  b: {command: [\"true\"], depends_on: [a], launch: {type: kubernetes, image: "+image+"}}\n")
	runLauncher(t, st, b, map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()})
	if wf := launchtest.WaitSettled(t, st, id, time.Minute); wf.State != state.WorkflowFailed {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	a := launchtest.Activity(t, st, id, "a")
	if a.State != state.Failed || !strings.Contains(a.Reason, "longer than the queued timeout 3s") ||
		!strings.Contains(a.Reason, "ImagePullBackOff") || !strings.Contains(a.Reason, `Failed to pull image "registry.example.com/nope:1"`) {
		t.Errorf("a: %s, reason %q", a.State, a.Reason)
	}
	waitDeleted(t, srv, 1)
}

// waitDeleted waits until n Jobs were deleted with foreground
// propagation and are gone.
func waitDeleted(t *testing.T, srv *k8stest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		deleted := 0
		for _, r := range srv.Requests() {
			var opts metav1.DeleteOptions
			if r.Verb == "delete" && r.Resource == "jobs" && json.Unmarshal(r.Body, &opts) == nil &&
				opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground {
				deleted++
			}
		}
		if deleted >= n && len(srv.Jobs()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Jobs deleted in the foreground, %d left, after a minute; want %d deleted and none left", deleted, len(srv.Jobs()), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCancelDeletesTheJob: a cancelled activity's Job is deleted, pod
// first, once the activity's kill grace has passed; the pod's process is
// stopped with it.
func TestCancelDeletesTheJob(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	srv := newServer(t, dynamotest.Env(t, st.Prefix()))
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := launchtest.Start(t, st, "name: cancel\nactivities:\n  a:\n    command: [sleep, \"300\"]\n    kill_grace: 2s\n"+
		"    launch: {type: kubernetes, image: "+image+"}\n")
	runLauncher(t, st, b, map[string]string{"WHIMBREL_TABLE_PREFIX": st.Prefix()})
	deadline := time.Now().Add(time.Minute)
	for launchtest.Activity(t, st, id, "a").State != state.Running {
		if time.Now().After(deadline) {
			t.Fatal("the activity did not start within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancelled := time.Now()
	if _, err := workflow.Cancel(launchtest.Context(t), st, id, "test", nil); err != nil {
		t.Fatal(err)
	}
	waitDeleted(t, srv, 1)
	if since := time.Since(cancelled); since < time.Second {
		t.Errorf("the Job was deleted %s after the cancel, before the kill grace of 2s", since)
	}
	if a := launchtest.Activity(t, st, id, "a"); a.State != state.CancelledRunning {
		t.Errorf("a: %s", a.State)
	}
}

// TestJobNames: the Job's name is a DNS-1123 label of at most 63
// characters, the same for the same launch and different for another
// attempt, whatever the activity is called.
func TestJobNames(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range []string{"a", "Train_Model", strings.Repeat("x", 200), "<script>", "\x1b[31m", "--"} {
		for attempt := 0; attempt < 2; attempt++ {
			j := launcher.Job{Key: state.ActivityKey{ActivityExecID: state.ActivityExecIDFor("wf", name), WorkflowExecID: "wf"}, ActivityName: name, Attempt: attempt}
			n := kubernetes.JobName(j)
			if len(n) > 63 || n != strings.Trim(n, "-") || strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
				t.Errorf("%q: name %q is not a DNS-1123 label", name, n)
			}
			if n != kubernetes.JobName(j) || seen[n] {
				t.Errorf("%q attempt %d: name %q not stable or not unique", name, attempt, n)
			}
			seen[n] = true
		}
	}
}

// TestExampleJobTemplate: the example workflow's train activity is
// created from its Job template, the template's settings kept and the
// launch's own added; a template that is not a Job fails the launch for
// good, naming the file.
func TestExampleJobTemplate(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	d, err := definition.Load(filepath.Join("examples", "kubernetes", "workflow.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, nil)
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "default")
	if err != nil {
		t.Fatal(err)
	}
	key := state.ActivityKey{ActivityExecID: state.ActivityExecIDFor("wf", "train"), WorkflowExecID: "wf"}
	j := launcher.Job{Key: key, WorkflowName: d.Name, ActivityName: "train", Command: d.Activities["train"].Command,
		Env: map[string]string{state.EnvActivityExecID: key.ActivityExecID, "SCRATCH": "/mine"}, Settings: d.Effective("train")}
	got, err := b.Launch(launchtest.Context(t), j)
	if err != nil {
		t.Fatal(err)
	}
	jobs := srv.Jobs()
	if len(jobs) != 1 || got != kubernetes.LaunchedAsPrefix+"batch/"+jobs[0].Name {
		t.Fatalf("launched as %q, Jobs %d", got, len(jobs))
	}
	job := jobs[0]
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if job.Labels["team"] != "ml" || len(pod.Tolerations) != 1 || len(pod.Volumes) != 1 || c.Name != "train" ||
		c.Resources.Limits.Memory().String() != "8Gi" || pod.NodeSelector["pool"] != "gpu" || *pod.TerminationGracePeriodSeconds != 70 ||
		strings.Join(c.Args, " ") != "python train.py --epochs 3" || pod.ServiceAccountName != "" {
		t.Errorf("Job from the template: %+v", job)
	}
	scratch := 0
	for _, e := range c.Env {
		if e.Name == "SCRATCH" {
			scratch++
			if e.Value != "/mine" {
				t.Errorf("SCRATCH is %q: the wrapper's environment must win over the template's", e.Value)
			}
		}
	}
	if scratch != 1 {
		t.Errorf("SCRATCH given %d times", scratch)
	}

	bad := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\nspec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Settings.Launch.JobTemplate = bad
	_, err = b.Launch(launchtest.Context(t), j)
	var tmp *launcher.TemporaryError
	if err == nil || errors.As(err, &tmp) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "not a batch/v1 Job") {
		t.Errorf("a Pod as template: %v", err)
	}
}

// TestPodFailsBeforeClaiming: a pod whose wrapper exits before claiming
// its activity (here it cannot reach the store) fails the activity at
// once with what the pod said, not at the queued timeout.
func TestPodFailsBeforeClaiming(t *testing.T) {
	t.Parallel()
	st := dynamotest.NewStore(t, dynamodb.Options{})
	srv := newServer(t, nil)
	srv.Images["registry.example.com/broken:1"] = []string{"/bin/sh", "-c", "echo 'cannot reach the store' >&2; exit 125", "whimbrel-run"}
	b, err := kubernetes.NewBackend(&rest.Config{Host: srv.URL}, "batch")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := launchtest.Start(t, st, "name: broken\nactivities:\n  a: {command: [\"true\"], launch: {type: kubernetes, image: registry.example.com/broken:1}}\n")
	runLauncher(t, st, b, nil)
	if wf := launchtest.WaitSettled(t, st, id, time.Minute); wf.State != state.WorkflowFailed {
		t.Fatalf("workflow %s: %s", wf.State, wf.Reason)
	}
	a := launchtest.Activity(t, st, id, "a")
	if !strings.Contains(a.Reason, "failed before whimbrel-run claimed the activity") || !strings.Contains(a.Reason, "Error (exit 125)") ||
		strings.Contains(a.Reason, "queued timeout") {
		t.Errorf("a: %s, reason %q", a.State, a.Reason)
	}
}
