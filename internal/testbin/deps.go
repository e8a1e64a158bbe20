package testbin

import (
	"os/exec"
	"strings"
	"testing"
)

// CheckDeps fails the test if a package that pattern (a go list pattern,
// relative to the calling test's package) builds with, its tests left out,
// is one of forbidden or lies under one of them (a forbidden path "p/"
// matches what is under p only).
func CheckDeps(t *testing.T, pattern string, forbidden ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pattern).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pattern, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s lists nothing", pattern)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasSuffix(f, "/") && strings.HasPrefix(d, f) {
				t.Errorf("%s links %s, which it must not (forbidden: %s)", pattern, d, f)
			}
		}
	}
}
