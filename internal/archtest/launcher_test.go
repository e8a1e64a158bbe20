package archtest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

// launchBackends are the launcher's backends, one package per launch type.
var launchBackends = []string{"launcher/docker", "launcher/ecs", "launcher/kubernetes", "launcher/local"}

// TestLaunchBackendsAreListed fails for a package under launcher/ (but
// launcher/internal) that launchBackends does not name, so that the checks
// below cover every backend.
func TestLaunchBackendsAreListed(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(root, "launcher"))
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "internal" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(root, "launcher", e.Name(), "*.go"))
		if slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") }) {
			found = append(found, "launcher/"+e.Name())
		}
	}
	if !slices.Equal(found, launchBackends) {
		t.Errorf("the launcher's backend packages are %v, launchBackends names %v: add the new one there", found, launchBackends)
	}
}

// TestLaunchBackendsStandAlone fails for a backend of the launcher that
// links another backend, and for the launcher that links any: what the
// backends share lives below them, in package launcher, and only the
// commands wire them together.
func TestLaunchBackendsStandAlone(t *testing.T) {
	all := make([]string, len(launchBackends))
	for i, b := range launchBackends {
		all[i] = module + "/" + b
	}
	testbin.CheckDeps(t, "../../launcher", all...)
	for _, b := range launchBackends {
		others := slices.DeleteFunc(slices.Clone(all), func(o string) bool { return o == module+"/"+b })
		testbin.CheckDeps(t, "../../"+b, others...)
	}
}

// TestWrapperLinksNoRemoteBackend fails if whimbrel-run, which runs in
// every container and task, links the ECS or the Docker backend, or the
// ECS SDK.
func TestWrapperLinksNoRemoteBackend(t *testing.T) {
	testbin.CheckDeps(t, "../../cmd/whimbrel-run",
		module+"/launcher/docker", module+"/launcher/ecs", "github.com/aws/aws-sdk-go-v2/service/ecs")
}

// TestOnlyTheLauncherLinksClientGo fails if a binary that does not launch
// on Kubernetes links the Kubernetes backend or client-go: whimbrel-run
// runs in every container, and the others never create a Job.
func TestOnlyTheLauncherLinksClientGo(t *testing.T) {
	for _, cmd := range []string{"whimbrel-run", "whimbrel-monitor", "whimbrel", "whimbrel-poller", "whimbrel-lambda"} {
		testbin.CheckDeps(t, "../../cmd/"+cmd, module+"/launcher/kubernetes", "k8s.io/client-go/rest", "k8s.io/api/batch/v1")
	}
}
