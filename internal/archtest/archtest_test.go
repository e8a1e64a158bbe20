package archtest

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/whimbrel/whimbrel"

// root is the module's root, two levels above this package.
var root = filepath.Join("..", "..")

// maxCmdLines is the most lines a non-test Go file in a command's folder
// (cmd/NAME/*.go) or in what the commands share (cmd/internal/NAME/*.go)
// may have.
const maxCmdLines = 110

// TestCmdFilesStayThin fails for a command file over maxCmdLines lines:
// move its logic into the package that owns it, or split it by command.
func TestCmdFilesStayThin(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "cmd", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := filepath.Glob(filepath.Join(root, "cmd", "internal", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, shared...)
	if len(files) == 0 {
		t.Fatal("no cmd/*/*.go files found: is the test run from internal/archtest?")
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		n := lines(t, f)
		if n > maxCmdLines {
			t.Errorf("%s has %d lines, more than %d: move its logic into the package that owns it (cmd/ keeps flags, --help texts, wiring and exit codes) or split it by command",
				rel, n, maxCmdLines)
		}
	}
}

func lines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// levels place each package of the module (its path below the module),
// as docs/architecture.md draws them: a package may import only packages
// of a lower level. Packages that hold only tests are not checked.
var levels = map[string]int{
	// Ground floor: helpers that import nothing of the module.
	"internal/inert": 0, "internal/fault": 0, "internal/clock": 0, "internal/nudge": 0, "internal/testbin": 0, "internal/jsonobj": 0,
	"internal/k8stest": 0, // a stand-in Kubernetes API server, on k8s.io alone
	// The contract, and what sits right on it.
	"state":                   2,
	"process":                 3,
	"state/internal/attr":     4,
	"state/internal/fuzzitem": 4,
	"state/storetest":         4,
	"heartbeat":               4,
	// The backends.
	"state/dynamodb": 6, "state/sqlite": 6, "state/codec": 5,
	"internal/dynamotest": 8,
	// The core: the definition language, the contract's moves, and the
	// wrapper's life.
	"definition": 6,
	"workflow":   8,
	"wrapper":    10,
	// Drivers and wings on top of the core.
	"simpleapi/inbox": 10, "simpleapi/report": 10, // the wing's items; the wrapper's reporter for --api simple
	"simpleapi/dynamoinbox": 12, "simpleapi/sqliteinbox": 12, "simpleapi/inboxtest": 12,
	"launcher": 12, "monitor": 12, "schedule": 12, "inspect": 12,
	"notify": 12, // workflow: delivers what its endings write
	// The launcher's backends, each on the launcher and none on another,
	// and what their tests share.
	"launcher/local": 13, "launcher/docker": 13, "launcher/ecs": 13, "launcher/kubernetes": 13, "launcher/internal/launchtest": 13,
	"metrics":          13, // launcher, monitor, schedule: their observers, for Prometheus
	"simpleapi":        14, // the processor
	"local":            14, // launcher, launcher/local, monitor
	"web":              14, // inspect, schedule
	"simpleapi/stream": 15, // decoding of stream records, shared by the Lambda handler and the poller
	"simpleapi/lambda": 16, "simpleapi/poller": 16,
	"local/view": 16, // local, inspect
	"local/up":   16, // launcher, monitor, schedule, web, simpleapi
	// Commands and what only they use.
	"cmd/internal/cli":  18,
	"cmd":               20, // every cmd/NAME
	"tools/benchreport": 20,
	// Tests only, of everything below.
	"internal/archtest": 20, "internal/dockertest": 20, "reliability": 20,
}

// levelOf is the level of a package of the module; ok is false for one
// the table does not place.
func levelOf(pkg string) (int, bool) {
	if l, ok := levels[pkg]; ok {
		return l, true
	}
	if strings.HasPrefix(pkg, "cmd/") && strings.Count(pkg, "/") == 1 {
		return levels["cmd"], true
	}
	return 0, false
}

// TestImportsPointDown fails for an import of a package of the same level
// or above, and for a package the levels do not place.
func TestImportsPointDown(t *testing.T) {
	imports := moduleImports(t)
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		lp, ok := levelOf(p)
		if !ok {
			t.Errorf("package %s has no level: place it in levels (internal/archtest) and in docs/architecture.md", p)
			continue
		}
		for _, q := range imports[p] {
			lq, ok := levelOf(q)
			if ok && lq >= lp {
				t.Errorf("%s (level %d) imports %s (level %d): imports must point down; see docs/architecture.md", p, lp, q, lq)
			}
		}
	}
}

// moduleImports maps each package of the module with non-test Go files to
// the packages of the module those files import, both as paths below the
// module. Build constraints are ignored: every file counts.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || nestedModule(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		seen := out[pkg]
		if seen == nil {
			seen = []string{}
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if q, ok := strings.CutPrefix(p, module+"/"); ok {
				seen = append(seen, q)
			}
		}
		out[pkg] = seen
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no Go files found: is the test run from internal/archtest?")
	}
	return out
}

// nestedModule reports whether dir holds a go.mod of its own: a module
// apart (bench/peers, which takes the Temporal SDK), built and vetted on
// its own, which neither the levels nor this module's rules cover.
func nestedModule(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}
