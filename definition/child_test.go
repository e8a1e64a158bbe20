package definition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadFiles writes the files into a fresh folder and loads the first.
func loadFiles(t *testing.T, first string, files map[string]string) (*Workflow, error) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Load(filepath.Join(dir, first))
}

const childYAML = "name: child\nparams: {source: {required: true}}\noutputs: {rows: \"{{ outputs.load.rows }}\"}\nactivities:\n  load: {command: [\"true\"]}\n"

func TestChildDefinitionErrors(t *testing.T) {
	for _, c := range []struct {
		name, parent string
		want         string
	}{
		{"includes itself", "name: p\nactivities:\n  a: {workflow: p.yaml}\n", "includes itself: "},
		{"command and workflow", "name: p\nactivities:\n  a: {workflow: c.yaml, command: [\"true\"], params: {source: x}}\n", "runs a workflow and a command"},
		{"params without workflow", "name: p\nactivities:\n  a: {command: [\"true\"], params: {x: y}}\n", "params are for an activity that runs a workflow"},
		{"undeclared child param", "name: p\nactivities:\n  a: {workflow: c.yaml, params: {source: x, nope: y}}\n", `workflow "child" declares no such parameter`},
		{"missing required child param", "name: p\nactivities:\n  a: {workflow: c.yaml}\n", `workflow "child" requires the parameter source`},
		{"param template names a non-upstream", "name: p\nactivities:\n  b: {command: [\"true\"]}\n  a: {workflow: c.yaml, params: {source: \"{{ outputs.b.x }}\"}}\n", "not in its depends_on"},
		{"workflow is a list", "name: p\nactivities:\n  a: {workflow: [c.yaml]}\n", "workflow must be a file name or {name: REGISTERED}"},
		{"workflow names both", "name: p\nactivities:\n  a: {workflow: {file: c.yaml, name: c}}\n", "not both"},
		{"workflow field misspelt", "name: p\nactivities:\n  a: {workflow: {fiel: c.yaml}}\n", `unknown field "fiel"`},
		{"missing file", "name: p\nactivities:\n  a: {workflow: nowhere.yaml}\n", "nowhere.yaml"},
		{"outputs name no activity", "name: p\noutputs: {x: \"{{ outputs.ghost.y }}\"}\nactivities:\n  a: {command: [\"true\"]}\n", `names "ghost", which is not an activity`},
		{"outputs not a mapping", "name: p\noutputs: [x]\nactivities:\n  a: {command: [\"true\"]}\n", "outputs must be a mapping"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadFiles(t, "p.yaml", map[string]string{"p.yaml": c.parent, "c.yaml": childYAML})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestChildStoredWithParent: the child's definition is stored inside the
// parent's, and read back from the stored form with its outputs.
func TestChildStoredWithParent(t *testing.T) {
	d, err := loadFiles(t, "p.yaml", map[string]string{
		"p.yaml": "name: p\nactivities:\n  a: {workflow: c.yaml, params: {source: orders}}\n",
		"c.yaml": childYAML,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadStored(d.JSON())
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Activity("a")
	if err != nil || !a.IsChild() || a.Workflow.Definition == nil || a.Workflow.Definition.Outputs["rows"] == "" {
		t.Fatalf("stored activity %+v %v, want its child's definition with outputs", a, err)
	}
	child, err := ReadStored(a.Workflow.Definition.JSON())
	if err != nil {
		t.Fatal(err)
	}
	if got := child.OutputRefs(); len(got) != 1 || got[0] != "load" {
		t.Errorf("output refs %v, want [load]", got)
	}
	if _, err := FromJSON(d.JSON()); err != nil {
		t.Errorf("the stored form does not read back: %v", err)
	}
}
