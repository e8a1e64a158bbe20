//go:build docker && linux

package dockertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEngineScriptKeepsStateInTheBuildDir runs scripts/docker-engine as a
// fresh checkout would (a copy of the script in a tree of its own, with its
// own socket and lock): the engine's data root is under the tree's build
// directory, and stop removes the data and exec roots, unmounting what is
// mounted under them first, so that the removal never reaches through a
// mount into another directory.
func TestEngineScriptKeepsStateInTheBuildDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("needs root, as dockerd does")
	}
	tree := t.TempDir()
	script, err := os.ReadFile("../../scripts/docker-engine")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(tree, "scripts", "docker-engine")
	if err := os.WriteFile(bin, script, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tree, "d.sock")
	home := filepath.Join(tree, ".build", "docker")
	// The exec root is the tree's own, named by its data root's home.
	sum := sha256.Sum256([]byte(home))
	execRoot := fmt.Sprintf("/tmp/whimbrel-dockerd-%d-%s.exec", os.Getuid(), hex.EncodeToString(sum[:])[:8])
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "DOCKER_ENGINE_HOME" && k != "DOCKER_ENGINE_EXEC" && k != "DOCKER_HOST" && k != "XDG_CACHE_HOME" {
			env = append(env, kv)
		}
	}
	env = append(env, "DOCKER_ENGINE_SOCK="+sock, "XDG_CACHE_HOME="+filepath.Join(tree, "cache"))
	engine := func(arg string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, arg)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker-engine %s: %v\n%s", arg, err, out)
		}
	}
	t.Cleanup(func() {
		// Whatever the test left: the engine stopped, nothing mounted.
		cmd := exec.Command(bin, "stop")
		cmd.Env = env
		_ = cmd.Run()
		_ = unix.Unmount(filepath.Join(home, "data", "mnt"), unix.MNT_DETACH)
	})
	engine("start")
	if _, err := os.Stat(execRoot); err != nil {
		t.Errorf("the exec root: %v", err)
	}
	root, err := exec.Command("docker", "-H", "unix://"+sock, "info", "--format", "{{.DockerRootDir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(root)); got != filepath.Join(home, "data") {
		t.Fatalf("the engine's data root is %s, want %s, under the tree's build directory", got, filepath.Join(home, "data"))
	}
	// A mount under the data root, of a directory that must survive.
	outside := filepath.Join(tree, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(home, "data", "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(outside, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	engine("stop")
	for _, dir := range []string{filepath.Join(home, "data"), execRoot} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s is still there after stop (%v)", dir, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("stop removed a file through a mount under the data root: %v", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (strings.HasPrefix(f[4], home) || strings.HasPrefix(f[4], execRoot)) {
			t.Errorf("still mounted after stop: %s", f[4])
		}
	}
}
