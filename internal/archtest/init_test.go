package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoInit fails for a func init() in a non-test file of the module. What
// a program does at start is said in its main: a binary that re-runs
// itself as a guard does so by an explicit call (process.GuardMain), and
// a list (the store's tables) is built in one place, not appended to from
// other files.
func TestNoInit(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
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
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		n++
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: func init(): make what it does an explicit call from main, or build what it fills in one place",
					filepath.ToSlash(rel)+":"+strconv.Itoa(fset.Position(fn.Pos()).Line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no Go files found: is the test run from internal/archtest?")
	}
}
