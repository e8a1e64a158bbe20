//go:build docker && linux

package dockertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// image is the test image: whimbrel-run as ENTRYPOINT, busybox, and tini
// at /usr/bin/tini.
var image string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
	cancel()
	if err != nil {
		msg := fmt.Sprintf("dockertest: no Docker engine (DOCKER_HOST=%q): %v: %s\n"+
			"  run the group with: scripts/docker-engine run -- scripts/dynamodb-local run -- go test -tags docker ./internal/dockertest/",
			os.Getenv("DOCKER_HOST"), err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, msg)
			return 1
		}
		fmt.Println("SKIP", msg)
		return 0
	}
	began := time.Now()
	image = fmt.Sprintf("whimbrel-test:%d", os.Getpid())
	if err := buildImage(image); err != nil {
		fmt.Fprintln(os.Stderr, "dockertest:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "dockertest: built %s in %v (engine %s)\n", image, time.Since(began).Round(time.Millisecond), bytes.TrimSpace(out))
	code := m.Run()
	_ = exec.Command("docker", "rmi", "--force", image).Run()
	return code
}

// buildImage makes the test image without a registry: a rootfs with the
// static wrapper, busybox (every applet linked) and tini, imported.
func buildImage(tag string) error {
	root, err := os.MkdirTemp("", "whimbrel-rootfs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	for _, d := range []string{"bin", "usr/bin", "usr/local/bin", "tmp", "proc", "sys", "dev", "etc", "state"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	if prebuilt := os.Getenv("WHIMBREL_TEST_DOCKER_WRAPPER"); prebuilt != "" {
		// A static whimbrel-run built elsewhere, such as from an older
		// commit to show that these tests fail without its fixes.
		if err := copyFile(prebuilt, filepath.Join(root, "usr/local/bin/whimbrel-run")); err != nil {
			return err
		}
	} else {
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(root, "usr/local/bin/whimbrel-run"), "../../cmd/whimbrel-run")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build whimbrel-run: %v\n%s", err, out)
		}
	}
	busybox, err := firstFile("/bin/busybox", "/usr/bin/busybox")
	if err != nil {
		return fmt.Errorf("busybox: %w (apt-get install busybox-static)", err)
	}
	if err := copyFile(busybox, filepath.Join(root, "bin/busybox")); err != nil {
		return err
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			return err
		}
	}
	tini, err := firstFile("/usr/bin/tini-static", "/usr/bin/tini")
	if err != nil {
		return fmt.Errorf("tini: %w (apt-get install tini)", err)
	}
	if err := copyFile(tini, filepath.Join(root, "usr/bin/tini")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tar := exec.CommandContext(ctx, "tar", "-C", root, "-c", ".")
	imp := exec.CommandContext(ctx, "docker", "import",
		"--change", `ENTRYPOINT ["/usr/local/bin/whimbrel-run", "--"]`,
		"--change", `ENV PATH=/usr/local/bin:/usr/bin:/bin`, "-", tag)
	pipe, err := tar.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var impOut bytes.Buffer
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := tar.Start(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	if err := imp.Run(); err != nil {
		_ = tar.Wait()
		return fmt.Errorf("docker import: %v\n%s", err, impOut.String())
	}
	if err := tar.Wait(); err != nil {
		return fmt.Errorf("tar: %w", err)
	}
	return nil
}

func firstFile(paths ...string) (string, error) {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %v exists", paths)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
