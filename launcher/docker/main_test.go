package docker_test

import (
	"path/filepath"
	"testing"

	"github.com/whimbrel/whimbrel/internal/testbin"
)

var wrapper string

// TestMain builds whimbrel-run once, for the container stand-in of
// TestDataThroughDocker.
func TestMain(m *testing.M) {
	testbin.Main(func(dir string) int {
		wrapper = filepath.Join(dir, "whimbrel-run")
		return m.Run()
	}, nil, map[string]string{"whimbrel-run": "../../cmd/whimbrel-run"})
}
