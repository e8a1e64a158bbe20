package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/whimbrel/whimbrel/internal/nudge"
	"github.com/whimbrel/whimbrel/state"
)

// Every process that uses an embedded store is on the same machine, so a
// write that takes a running activity away from its wrapper (a cancel, a
// time out) can tell that wrapper at once instead of leaving it to find
// out at its next heartbeat. A wrapper that watches its activity listens
// on a loopback UDP port (package nudge) and keeps the port's address in a
// file of the folder beside the database (PATH-wake/); the process that
// makes such a write sends one datagram there. The datagram only makes
// the wrapper beat at once: the beat's conditional write is what decides,
// so a lost, stale or stray datagram costs nothing but a beat.

// wakeDir is the folder of the wake addresses, beside the database file.
func (st *Store) wakeDir() string { return st.path + "-wake" }

// wakeFile is where the wake address of the activity key is kept: a hash
// of the key, since activity names may hold any character.
func (st *Store) wakeFile(key state.ActivityKey) string {
	h := sha256.Sum256([]byte(key.WorkflowExecID + "\x00" + key.ActivityExecID))
	return filepath.Join(st.wakeDir(), hex.EncodeToString(h[:16]))
}

// WatchActivity delivers on changed when another process of this machine
// takes the activity away from its running wrapper (CANCELLED_RUNNING,
// TIMED_OUT) through this store. stop ends the watch and removes its
// address.
func (st *Store) WatchActivity(key state.ActivityKey) (changed <-chan struct{}, stop func(), err error) {
	l, err := nudge.Listen()
	if err != nil {
		return nil, nil, err
	}
	path := st.wakeFile(key)
	if err := writeAtomic(path, l.Addr()); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("watch activity %s: %w", key.ActivityExecID, err)
	}
	return l.C(), func() {
		// Only the address this watch wrote is removed: the file is keyed
		// by the activity, which one wrapper at a time holds.
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == l.Addr() {
			os.Remove(path)
		}
		l.Close()
	}, nil
}

// writeAtomic writes content to path through a file of its own, so that a
// reader sees the whole address or none.
func writeAtomic(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, []byte(content+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// wakeAfter tells the activity's wrapper, if one watches it, that a write
// c has just landed, when c takes a running activity away from it.
func (st *Store) wakeAfter(key state.ActivityKey, c state.ActivityChange) {
	if c.To != state.CancelledRunning && c.To != state.TimedOut {
		return
	}
	path := st.wakeFile(key)
	if _, err := os.Lstat(path); err != nil {
		return // no wrapper watches it
	}
	addr, ok := readAddr(path)
	// The wrapper will not need another wake for this activity: the
	// state it was taken to is final for it.
	os.Remove(path)
	if !ok {
		st.log.Warn("ignoring a wake address that is not a loopback one", "file", path)
		return
	}
	if err := nudge.Send(addr.String()); err != nil {
		st.log.Debug("waking the wrapper failed; it finds out at its next heartbeat", "activity_exec_id", key.ActivityExecID, "error", err)
	}
}
