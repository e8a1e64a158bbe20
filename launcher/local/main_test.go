package local_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
	"github.com/whimbrel/whimbrel/process"
)

var wrapper string

// TestMain builds whimbrel-run once: the local backend starts it. The
// guard process of activities supervised inline is this test binary,
// re-run: it becomes the guard first thing.
func TestMain(m *testing.M) {
	if code, ok := process.GroupGuardMain(); ok {
		os.Exit(code)
	}
	testbin.Main(func(dir string) int {
		wrapper = filepath.Join(dir, "whimbrel-run")
		return m.Run()
	}, nil, map[string]string{"whimbrel-run": "../../cmd/whimbrel-run"})
}
