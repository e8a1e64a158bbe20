package sqlite

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/whimbrel/whimbrel/internal/nudge"
)

// A launcher on the embedded store finds the activities another process
// readied by listing the READY ones, on its interval. A start (`whimbrel
// start`, a rerun, a schedule's fire) readies a whole workflow's first
// activities at once, so the store tells the launchers of its machine
// when it is done: each launcher keeps the address of its nudge listener
// (package nudge) in a file of PATH-wake/launchers/, and WakeLaunchers
// sends each one datagram. The datagram only starts a pass early: what a
// pass finds and claims is decided by the store, so a lost, stale or
// stray datagram costs nothing but a listing.

// launchersDir is the folder of the launchers' addresses.
func (st *Store) launchersDir() string { return filepath.Join(st.wakeDir(), "launchers") }

// AnnounceLauncher makes WakeLaunchers reach the nudge listener at addr
// (a loopback UDP address) until stop is called. A launcher killed before
// it stops leaves its file behind; the next WakeLaunchers removes it once
// its process is gone.
func (st *Store) AnnounceLauncher(addr string) (stop func(), err error) {
	ua, ok := loopback(addr)
	if !ok {
		return nil, fmt.Errorf("announce launcher %q: the address is not a loopback UDP address", addr)
	}
	path := filepath.Join(st.launchersDir(), strconv.Itoa(os.Getpid())+"-"+strconv.Itoa(int(ua.Port())))
	if err := writeAtomic(path, ua.String()); err != nil {
		return nil, fmt.Errorf("announce launcher %s: %w", addr, err)
	}
	return func() { os.Remove(path) }, nil
}

// WakeLaunchers nudges every launcher announced on this store's file, so
// that each lists the READY activities now instead of at its next tick.
// It never fails: a launcher that misses the nudge finds the activities
// on its interval.
func (st *Store) WakeLaunchers() {
	dir := st.launchersDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // no launcher was ever announced here
	}
	for _, e := range entries {
		name := e.Name()
		pid, rest, ok := strings.Cut(name, "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil || n <= 0 || !e.Type().IsRegular() {
			continue // not an address file: left alone
		}
		path := filepath.Join(dir, name)
		if processGone(n) {
			os.Remove(path) // its launcher was killed, perhaps while writing it
			continue
		}
		port, err := strconv.Atoi(rest)
		if err != nil {
			continue // one being written (PID-PORT.tmp-PID)
		}
		addr, ok := readAddr(path)
		if !ok || int(addr.Port()) != port {
			st.log.Warn("ignoring a launcher address that is not a loopback one of the port its file names", "file", path)
			continue
		}
		if err := nudge.Send(addr.String()); err != nil {
			st.log.Debug("waking a launcher failed; it lists on its interval", "file", path, "error", err)
		}
	}
}

// readAddr reads the loopback UDP address kept in the file at path: a
// regular file (not a link, a pipe or a device, which could block or
// never end) of a few bytes.
func readAddr(path string) (netip.AddrPort, bool) {
	f, err := openRegular(path)
	if err != nil {
		return netip.AddrPort{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 128))
	if err != nil {
		return netip.AddrPort{}, false
	}
	return loopback(strings.TrimSpace(string(b)))
}

// loopback parses s as a loopback IP address and port. A host name is
// refused, not looked up: a file's content must not make a start wait
// for a resolver.
func loopback(s string) (netip.AddrPort, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().IsLoopback() || ap.Port() == 0 {
		return netip.AddrPort{}, false
	}
	return ap, true
}
