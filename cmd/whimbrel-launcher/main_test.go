package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

var binary string

func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		binary = filepath.Join(dir, "whimbrel-launcher")
		return m.Run()
	}, nil, map[string]string{"whimbrel-launcher": ".", "whimbrel-run": "../whimbrel-run"})
}

func run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}, env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// fakeECSClusters answers DescribeClusters: the cluster "batch" exists,
// no other.
func fakeECSClusters(t *testing.T) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if strings.Contains(string(body), `"batch"`) {
			fmt.Fprint(w, `{"clusters":[{"clusterName":"batch","status":"ACTIVE","clusterArn":"arn:aws:ecs:eu-west-1:123456789012:cluster/batch"}],"failures":[]}`)
			return
		}
		fmt.Fprint(w, `{"clusters":[],"failures":[{"arn":"arn:aws:ecs:eu-west-1:123456789012:cluster/nope","reason":"MISSING"}]}`)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestRefusesToStart: what the launcher cannot use stops it at start, with
// one line naming it and a non-zero exit, before it claims anything.
func TestRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sqlite := "WHIMBREL_STORE=sqlite:" + filepath.Join(dir, "state.db")
	ecsEnv := []string{sqlite, "AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s", "AWS_ENDPOINT_URL_ECS=" + fakeECSClusters(t)}
	closed := "http://127.0.0.1:1" // nothing listens on port 1
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,`+
			`"message":"jobs.batch is forbidden: User \"system:serviceaccount:batch:default\" cannot list resource \"jobs\" in API group \"batch\" in the namespace \"batch\""}`)
	}))
	t.Cleanup(forbidden.Close)
	kubeconfig := func(server string) string {
		path := filepath.Join(t.TempDir(), "kubeconfig")
		cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\nusers: [{name: u, user: {token: t}}]\n" +
			"contexts: [{name: c, context: {cluster: c, user: u, namespace: batch}}]\ncurrent-context: c\n"
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"log dir under a file", []string{sqlite}, []string{"--types", "local", "--wrapper", "/bin/true", "--log-dir", file + "/logs"}, 1,
			"--log-dir " + file + "/logs cannot be created: not a directory"},
		{"log dir not writable", []string{sqlite}, []string{"--types", "local", "--wrapper", "/bin/true", "--log-dir", "/sys"}, 1,
			"--log-dir /sys is not writable: permission denied"},
		{"docker CLI missing", []string{sqlite}, []string{"--types", "docker", "--docker", filepath.Join(dir, "no-docker")}, 1,
			`docker CLI "` + filepath.Join(dir, "no-docker") + `" not found: install Docker, name the CLI with --docker, or leave docker out of --types`},
		{"ecs without a cluster", []string{sqlite}, []string{"--types", "ecs"}, 2, "--types ecs needs --ecs-cluster"},
		// --types is read before the numbers, as it always was.
		{"unknown type and a bad number", []string{sqlite}, []string{"--types", "lokal", "--workers", "0"}, 2,
			`--types: "lokal" is not a launch type: use local, docker, ecs or kubernetes`},
		{"ecs without a region", []string{sqlite}, []string{"--types", "ecs", "--ecs-cluster", "batch"}, 1, "ECS needs a region: set AWS_REGION"},
		{"ecs cluster missing", ecsEnv, []string{"--types", "ecs", "--ecs-cluster", "nope"}, 1, `ECS cluster "nope" does not exist in eu-west-1`},
		{"ecs unreachable", append([]string{"AWS_ENDPOINT_URL_ECS=" + closed}, ecsEnv[:4]...), []string{"--types", "ecs", "--ecs-cluster", "batch"}, 1,
			`cannot reach ECS in eu-west-1 to check cluster "batch"`},
		{"kubernetes without a configuration", []string{sqlite}, []string{"--types", "kubernetes"}, 1,
			"no Kubernetes configuration: run the launcher in a cluster (with a service account), or give --kubeconfig (or KUBECONFIG)"},
		{"kubernetes unreachable", []string{sqlite}, []string{"--types", "kubernetes", "--kubeconfig", kubeconfig(closed)}, 1,
			"cannot reach the Kubernetes API server http://127.0.0.1:1 to list Jobs in namespace batch"},
		{"kubernetes forbidden", []string{sqlite, "KUBECONFIG=" + kubeconfig(forbidden.URL)}, []string{"--types", "kubernetes", "--k8s-namespace", "etl"}, 1,
			"the launcher may not list Jobs in namespace etl: bind it the Role of examples/kubernetes/rbac.yaml"},
		{"store unreachable", []string{"WHIMBREL_STORE=dynamodb", "AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=k", "AWS_SECRET_ACCESS_KEY=s",
			"AWS_ENDPOINT_URL_DYNAMODB=" + closed}, []string{"--types", "local", "--wrapper", "/bin/true"}, 3, `cannot reach the store (dynamodb, prefix "whimbrel_")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			out, code := run(t, tc.env, append(tc.args, "--once")...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output:\n%s\nwant exit %d and %q", code, out, tc.code, tc.want)
			}
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 1 {
				t.Errorf("%d lines, want one:\n%s", len(lines), out)
			}
			if took := time.Since(began); took > 30*time.Second {
				t.Errorf("took %s to refuse", took)
			}
		})
	}
}

// TestStarts: with what it needs at hand, the launcher starts (creating
// its log dir), serves what it can, and reports its pass.
func TestStarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logs := filepath.Join(dir, "a", "b", "logs")
	env := []string{"WHIMBREL_STORE=sqlite:" + filepath.Join(dir, "state.db"), "AWS_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=k",
		"AWS_SECRET_ACCESS_KEY=s", "AWS_ENDPOINT_URL_ECS=" + fakeECSClusters(t)}
	out, code := runInstalled(t, env, dir, "--types", "local,ecs", "--ecs-cluster", "batch", "--wrapper", "/bin/true", "--log-dir", logs, "--once")
	if code != 0 || !strings.Contains(out, "pass done") || !strings.Contains(out, "launched=0") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(logs); err != nil || !fi.IsDir() {
		t.Errorf("log dir not created: %v", err)
	}
	// Without --types, what cannot be served is left out, not fatal.
	out, code = runInstalled(t, env, dir, "--wrapper", "/bin/true", "--docker", "no-such-docker", "--once")
	if code != 0 || !strings.Contains(out, "docker CLI not found: docker activities are left to other launchers") {
		t.Errorf("default types without docker: exit %d\n%s", code, out)
	}
}

// runInstalled installs the SQLite store's tables, then runs the launcher.
func runInstalled(t *testing.T, env []string, dir string, args ...string) (string, int) {
	t.Helper()
	install(t, filepath.Join(dir, "state.db"))
	return run(t, env, args...)
}

func install(t *testing.T, path string) {
	t.Helper()
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Install(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultsMatchTheLauncher: the flags' defaults are the package's.
func TestDefaultsMatchTheLauncher(t *testing.T) {
	out, _ := run(t, nil, "--help")
	for _, want := range []string{
		fmt.Sprintf(`--workers=%d`, launcher.DefaultWorkers),
		fmt.Sprintf(`--retry-for=%s`, strings.TrimSuffix(launcher.DefaultRetryFor.String(), "0s")),
		fmt.Sprintf(`--call-timeout=%s`, launcher.DefaultCallTimeout.String()),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}

// TestGuardEnvironmentIsNotObeyed: the variable with which whimbrel-run
// re-runs itself as a guard process does not turn whimbrel-launcher, which
// links the process package (to guard its local wrappers), into a guard:
// only a main that calls process.GuardMain becomes one.
func TestGuardEnvironmentIsNotObeyed(t *testing.T) {
	out, code := run(t, []string{"WHIMBREL_RUNNER_GUARD=1"}, "--version")
	if code != 0 || !strings.Contains(out, "dev") {
		t.Errorf("whimbrel-launcher --version with WHIMBREL_RUNNER_GUARD set: exit %d, output %q; want its version", code, out)
	}
}
