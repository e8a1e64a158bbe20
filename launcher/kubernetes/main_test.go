package kubernetes_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/whimbrel/whimbrel/internal/k8stest"
	"github.com/whimbrel/whimbrel/internal/testbin"
)

// wrapper and launcherBin are built once, for the pods of the stand-in
// API server and for the launcher processes.
var wrapper, launcherBin string

// image is the image the stand-in's node can pull: its entrypoint is
// whimbrel-run, as the docs ask of a real one.
const image = "registry.example.com/whimbrel:test"

// servers are the stand-in API servers of every test, so that TestMain
// can hold the RBAC Role of examples/kubernetes against every request
// they answered.
var (
	serversMu sync.Mutex
	servers   []*k8stest.Server
)

// newServer starts a stand-in API server whose node runs whimbrel-run
// for image, with env added to each pod's environment.
func newServer(t testing.TB, env []string) *k8stest.Server {
	t.Helper()
	s := k8stest.New(t)
	s.Images[image] = []string{wrapper}
	s.NodeEnv = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	serversMu.Lock()
	servers = append(servers, s)
	serversMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			for _, j := range s.Jobs() {
				t.Logf("pod log of %s:\n%s", j.Name, s.Log(j.Name))
			}
		}
	})
	return s
}

// TestMain builds the binaries, runs the tests and then, when every test
// of the package ran and passed, checks that the RBAC Role the docs give
// grants exactly the verbs the tests' requests used: one verb short and
// a real launcher fails; one too many and the Role grants more than it
// needs.
func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		wrapper = filepath.Join(dir, "whimbrel-run")
		launcherBin = filepath.Join(dir, "whimbrel-launcher")
		code := m.Run()
		if code != 0 || flag.Lookup("test.run").Value.String() != "" || testing.Short() {
			return code
		}
		if err := checkRole(filepath.Join("..", "..", "examples", "kubernetes", "rbac.yaml")); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: RBAC Role:", err)
			return 1
		}
		return 0
	}, nil, map[string]string{"whimbrel-run": "../../cmd/whimbrel-run", "whimbrel-launcher": "../../cmd/whimbrel-launcher"})
}

// checkRole compares the Role's rules with the requests recorded.
func checkRole(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var role struct {
		Kind  string `json:"kind"`
		Rules []struct {
			APIGroups []string `json:"apiGroups"`
			Resources []string `json:"resources"`
			Verbs     []string `json:"verbs"`
		} `json:"rules"`
	}
	// The file holds the Role, then its binding and service account.
	doc, _, _ := strings.Cut(string(b), "\n---")
	if err := yaml.Unmarshal([]byte(doc), &role); err != nil || role.Kind != "Role" {
		return fmt.Errorf("%s does not start with a Role: %v", path, err)
	}
	granted := map[string]bool{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	used := map[string]bool{}
	serversMu.Lock()
	for _, s := range servers {
		for _, r := range s.Requests() {
			used[r.Group+"/"+r.Resource+":"+r.Verb] = true
		}
	}
	serversMu.Unlock()
	var missing, extra []string
	for k := range used {
		if !granted[k] {
			missing = append(missing, k)
		}
	}
	for k := range granted {
		if !used[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		return fmt.Errorf("%s: the launcher used %v, which the Role does not grant, and the Role grants %v, which it never used", path, missing, extra)
	}
	if !used["batch/jobs:create"] {
		return fmt.Errorf("no Job was created: the tests did not run")
	}
	return nil
}
