package definition

import (
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// A when on a for_each activity that reads item or item_index is judged
// per element, where the element is about to run (docs/for-each.md,
// docs/control-flow.md): the map itself opens whatever it says, and each
// element whose when is false is skipped. A when that reads neither is
// judged once, for the whole map, before it opens.

// WhenPerElement reports whether the activity's when reads the element
// (item or item_index), so that it is judged per element of its map.
func (a *Activity) WhenPerElement() bool {
	return a != nil && a.When != "" && whenReadsItem(a.When)
}

// whenReadsItem reports whether the expression names item or item_index.
// An expression that does not parse reads nothing (the check reports it).
func whenReadsItem(src string) bool {
	tree, err := parser.Parse(src)
	if err != nil {
		return false
	}
	v := &itemFinder{}
	ast.Walk(&tree.Node, v)
	return v.found
}

type itemFinder struct{ found bool }

func (f *itemFinder) Visit(node *ast.Node) {
	if id, ok := (*node).(*ast.IdentifierNode); ok && (id.Value == "item" || id.Value == "item_index") {
		f.found = true
	}
}
