package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestCrossBuilds builds the operator CLI for the platforms operators run
// it on: it must not pull in the Linux-only process code (make lint's
// cross target builds them too).
func TestCrossBuilds(t *testing.T) {
	t.Parallel()
	for _, p := range []struct{ goos, goarch string }{{"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}} {
		t.Run(p.goos+"-"+p.goarch, func(t *testing.T) {
			cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
			cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s GOARCH=%s go build ./cmd/whimbrel: %v\n%s", p.goos, p.goarch, err, out)
			}
		})
	}
}
