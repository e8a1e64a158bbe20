package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/state/sqlite"
	"github.com/whimbrel/whimbrel/state/storetest"
)

// TestFilesOnlyTheUserReads: under the common umask 022, the store's
// folder is 0700 and the database, its -wal and its -shm are 0600: they
// hold params, outputs and the tails of stderr. (Not parallel: the umask
// is the process's.)
func TestFilesOnlyTheUserReads(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := filepath.Join(t.TempDir(), "project", ".whimbrel")
	path := filepath.Join(dir, "state.db")
	st, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := st.Install(ctx, false); err != nil {
		t.Fatal(err)
	}
	storetest.Create(t, st, storetest.NewWorkflow(t, "wf", storetest.DAG{"a": nil}))

	want := map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600, path + "-wal": 0o600, path + "-shm": 0o600}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode() != mode {
			t.Errorf("%s is %s, want %s", p, fi.Mode(), mode)
		}
	}
}
