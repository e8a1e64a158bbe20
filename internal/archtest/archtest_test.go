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

// maxCmdLines is the most lines a non-test Go file directly in a command's
// folder (cmd/NAME/*.go) may have.
const maxCmdLines = 110

// thinning lists the command files known to be over maxCmdLines while the
// branch that owns them thins them (issue 16: the Simple API moves into
// its own packages). An entry fails the test once its file is thin: then
// delete the entry.
var thinning = map[string]string{
	"cmd/whimbrel/simple.go":   "branch wing",
	"cmd/whimbrel-run/main.go": "branch wing",
}

// TestCmdFilesStayThin fails for a command file over maxCmdLines lines:
// move its logic into the package that owns it, or split it by command.
func TestCmdFilesStayThin(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "cmd", "*", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no cmd/*/*.go files found: is the test run from internal/archtest?")
	}
	// An entry whose file is gone (moved, renamed) would excuse whatever
	// file takes its name next.
	for rel, owner := range thinning {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			t.Errorf("thinning names %s (%s), which is not there: delete its entry", rel, owner)
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		rel, _ := filepath.Rel(root, f)
		rel = filepath.ToSlash(rel)
		n := lines(t, f)
		if owner, ok := thinning[rel]; ok {
			if n <= maxCmdLines {
				t.Errorf("%s is thin now (%d lines): delete its entry in thinning", rel, n)
			} else {
				t.Logf("%s: %d lines, being thinned by %s", rel, n, owner)
			}
			continue
		}
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
	"internal/inert": 0, "internal/fault": 0, "internal/nudge": 0, "internal/testbin": 0,
	// The contract, and what sits right on it.
	"state":                   1,
	"process":                 1,
	"state/internal/attr":     2,
	"state/internal/fuzzitem": 2,
	"state/storetest":         2,
	"heartbeat":               2,
	// The backends.
	"state/dynamodb": 3, "state/sqlite": 3,
	"internal/dynamotest": 4,
	// The core: the contract's moves, and the wrapper's life.
	"workflow": 4,
	"wrapper":  5,
	// Drivers and wings on top of the core.
	"launcher": 6, "monitor": 6, "schedule": 6, "inspect": 6, "simpleapi": 6,
	"local":            7, // launcher, monitor
	"web":              7, // inspect, schedule
	"simpleapi/lambda": 7, "simpleapi/poller": 7,
	"local/view": 8, // local, inspect
	// Commands and what only they use.
	"cmd/internal/cli":  9,
	"cmd":               10, // every cmd/NAME
	"tools/benchreport": 10,
	// Tests only, of everything below.
	"internal/archtest": 10, "internal/dockertest": 10, "reliability": 10,
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
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
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
