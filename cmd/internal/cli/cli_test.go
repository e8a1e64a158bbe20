package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChoose checks each rule of store discovery, in order of precedence.
func TestChoose(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "project")
	deep := filepath.Join(project, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	found := filepath.Join(project, ".whimbrel", "state.db")
	touch(t, found)
	bare := filepath.Join(root, "bare")
	// A folder named like the file does not count.
	if err := os.MkdirAll(filepath.Join(bare, ".whimbrel", "state.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	explicit := filepath.Join(root, "x.db")

	for _, tc := range []struct {
		name, dir, flag, fallback string
		want                      string
	}{
		{"explicit --store wins over a found file", project, "sqlite:" + explicit, DefaultStore, "sqlite:" + explicit},
		{"explicit dynamodb wins over a found file", deep, "dynamodb", DefaultStore, "dynamodb"},
		{"found in the current folder", project, "", DefaultStore, "sqlite:" + found},
		{"found in a parent folder", deep, "", DefaultStore, "sqlite:" + found},
		{"nothing found: the default", root, "", DefaultStore, "dynamodb"},
		{"a folder is not a store", bare, "", DefaultStore, "dynamodb"},
		{"nothing found: whimbrel run's fallback, made absolute", bare, "", "sqlite:" + StateFile, "sqlite:" + filepath.Join(bare, ".whimbrel", "state.db")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(tc.dir)
			got := StoreFlags{Store: tc.flag}.Choose(tc.fallback)
			if got.Store != tc.want {
				t.Errorf("Choose in %s with --store %q: got %q (%s), want %q", tc.dir, tc.flag, got.Store, got.Why, tc.want)
			}
			if got.Why == "" {
				t.Error("Choose gives no reason")
			}
			if got.Embedded() != (got.Store != "dynamodb") {
				t.Errorf("Embedded() = %v for %s", got.Embedded(), got.Store)
			}
		})
	}
}
