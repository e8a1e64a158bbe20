package sqlite_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/internal/nudge"
)

// TestWakeLaunchers: WakeLaunchers nudges every launcher announced on the
// store's file until it stops; it removes the address of a launcher whose
// process is gone, and leaves alone what is not a loopback address or
// not an address file, without failing.
func TestWakeLaunchers(t *testing.T) {
	st := newStore(t)
	if _, err := st.AnnounceLauncher("192.0.2.1:9"); err == nil {
		t.Error("a launcher announced a non-loopback address")
	}
	if _, err := st.AnnounceLauncher("<script>"); err == nil {
		t.Error("a launcher announced a malformed address")
	}
	st.WakeLaunchers() // nothing announced yet: nothing to do

	nl, err := nudge.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	stop, err := st.AnnounceLauncher(nl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	dir := st.Path() + "-wake/launchers"
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, strconv.Itoa(gone.Process.Pid)+"-1")
	hostile := filepath.Join(dir, strconv.Itoa(os.Getpid())+"-2")
	for path, content := range map[string]string{
		stale:                           "127.0.0.1:1\n",
		hostile:                         "192.0.2.1:9\n",
		filepath.Join(dir, "notes.txt"): "\x1b[31m<script>",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	st.WakeLaunchers()
	select {
	case <-nl.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the announced launcher was not woken")
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the address of a launcher whose process is gone is still there: %v", err)
	}
	for _, kept := range []string{hostile, filepath.Join(dir, "notes.txt")} {
		if _, err := os.Stat(kept); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}

	stop()
	st.WakeLaunchers()
	select {
	case <-nl.C():
		t.Error("a launcher that stopped its announcement was still woken")
	case <-time.After(200 * time.Millisecond):
	}
}
