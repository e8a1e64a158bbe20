package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunFilesOnlyTheUserReads: `whimbrel run` under the common umask 022
// leaves .whimbrel/ and its logs folders 0700, the embedded store and the
// activities' logs 0600: they hold params, outputs and what the commands
// printed. (SQLite removes the -wal and -shm files on the last close; the
// store's own test checks them while open.)
func TestRunFilesOnlyTheUserReads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	wf := filepath.Join(dir, "wf.yaml")
	if err := os.WriteFile(wf, []byte("name: quiet\nactivities:\n  a: {command: [echo, secret-output]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `umask 022 && exec "$0" run "$1"`, binary, wf)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("whimbrel run: %v\n%s", err, out.String())
	}
	var logs int
	err := filepath.WalkDir(filepath.Join(dir, ".whimbrel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700 | os.ModeDir
		}
		if strings.HasSuffix(p, ".log") {
			logs++
		}
		if fi.Mode() != want {
			t.Errorf("%s is %s, want %s", p, fi.Mode(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if logs == 0 {
		t.Errorf("no activity log under .whimbrel/logs\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, ".whimbrel", "state.db")); err != nil {
		t.Errorf("the embedded store: %v", err)
	}
}

// TestWebRefusesATokenFileOthersRead: whimbrel web refuses a token file
// that group or others may read, and says the chmod to run.
func TestWebRefusesATokenFileOthersRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o640); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := whimbrel(t, nil, "web", "--store", "sqlite:"+filepath.Join(dir, "state.db"), "--token-file", tokenFile)
	if code != 2 || !strings.Contains(errOut, "chmod 600 "+tokenFile) {
		t.Errorf("exit %d, stderr %q: want 2 and `chmod 600 %s`", code, errOut, tokenFile)
	}
}
