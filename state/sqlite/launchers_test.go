//go:build unix

package sqlite_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
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
	if _, err := st.AnnounceLauncher("localhost:9"); err == nil {
		t.Error("a launcher announced a host name, which a start would have to look up")
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
	me, dead := strconv.Itoa(os.Getpid()), strconv.Itoa(gone.Process.Pid)
	stale := filepath.Join(dir, dead+"-1")
	staleTmp := filepath.Join(dir, dead+"-1.tmp-"+dead)
	// A planted file may not send a datagram elsewhere than the port its
	// name gives: another listener of this machine is not nudged.
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	kept := map[string]string{
		filepath.Join(dir, me+"-2"):     "192.0.2.1:9\n",
		filepath.Join(dir, me+"-3"):     other.LocalAddr().String(),
		filepath.Join(dir, me+"-6"):     "localhost:6",
		filepath.Join(dir, "notes.txt"): "\x1b[31m<script>",
	}
	for path, content := range map[string]string{stale: "127.0.0.1:1\n", staleTmp: "127.0.0.1:1\n"} {
		kept[path] = content
	}
	for path, content := range kept {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	delete(kept, stale)
	delete(kept, staleTmp)
	// Neither a link to an endless device nor a pipe nobody writes may
	// hold a start up.
	if err := os.Symlink("/dev/zero", filepath.Join(dir, me+"-4")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, me+"-5"), 0o600); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	go func() { defer close(done); st.WakeLaunchers() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("WakeLaunchers did not return: a file of the folder held it up")
	}
	select {
	case <-nl.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the announced launcher was not woken")
	}
	for _, path := range []string{stale, staleTmp} {
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s, of a launcher whose process is gone, is still there: %v", filepath.Base(path), err)
		}
	}
	for path := range kept {
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	_ = other.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, _, err := other.ReadFromUDP(make([]byte, 16)); err == nil {
		t.Error("a file whose name gives another port than its address nudged that address")
	}

	stop()
	st.WakeLaunchers()
	select {
	case <-nl.C():
		t.Error("a launcher that stopped its announcement was still woken")
	case <-time.After(200 * time.Millisecond):
	}
}
