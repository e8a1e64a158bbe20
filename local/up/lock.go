package up

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// The lock says that a server serves an embedded store, and which: a file
// beside the store (LockFile) that the server holds an advisory lock on
// (flock) for as long as it runs, and that names its pid and web view. The
// kernel drops the lock when the process ends, however it ends, so a file
// left by a server that was killed does not count: no pid is trusted that
// could have been reused.

// LockFile is the lock file of the embedded store at statePath.
func LockFile(statePath string) string { return statePath + "-up.pid" }

// Info is what a running server says of itself in its lock file.
type Info struct {
	PID     int       `json:"pid"`
	Web     string    `json:"web,omitempty"` // the web view's address, without its token
	Started time.Time `json:"started"`
}

// Lock is a server's hold on its store's lock file; Release lets it go.
type Lock struct{ f *os.File }

// RunningError says that another server serves the store.
type RunningError struct {
	Store string
	Info  Info
}

func (e *RunningError) Error() string {
	msg := fmt.Sprintf("whimbrel up already serves %s", e.Store)
	if e.Info.PID > 0 {
		msg += fmt.Sprintf(" (pid %d", e.Info.PID)
		if e.Info.Web != "" {
			msg += ", web view " + e.Info.Web
		}
		msg += ")"
	}
	return msg + ": one is enough; stop it first (Ctrl-C where it runs) to start another"
}

// Acquire takes the lock of the store at statePath for this process and
// writes info into it; a *RunningError if another server holds it.
func Acquire(statePath string, info Info) (*Lock, error) {
	path := LockFile(statePath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the lock file %s: %w", path, err)
	}
	held, err := tryLock(f, true)
	// A reader asking whether a server runs holds a shared lock for a
	// moment: a held lock counts only once it stays held.
	for i := 0; err == nil && held && i < 10; i++ {
		time.Sleep(20 * time.Millisecond)
		held, err = tryLock(f, true)
	}
	if err == nil && held {
		other, _ := read(f)
		err = &RunningError{Store: statePath, Info: other}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	l := &Lock{f: f}
	if err := l.Update(info); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// Update writes info into the lock file.
func (l *Lock) Update(info Info) error {
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write the lock file: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("write the lock file: %w", err)
	}
	return nil
}

// Release empties the lock file and lets the lock go.
func (l *Lock) Release() {
	_ = l.f.Truncate(0)
	unlock(l.f)
	l.f.Close()
}

// Running reports whether a server serves the embedded store at
// statePath, and what it says of itself.
func Running(statePath string) (Info, bool) {
	f, err := os.Open(LockFile(statePath))
	if err != nil {
		return Info{}, false
	}
	defer f.Close()
	held, err := tryLock(f, false)
	if err != nil || !held {
		if err == nil {
			unlock(f)
		}
		return Info{}, false
	}
	info, _ := read(f)
	return info, true
}

func read(f *os.File) (Info, error) {
	var info Info
	b := make([]byte, 4096)
	n, err := f.ReadAt(b, 0)
	if n == 0 {
		return info, errors.Join(err, errors.New("empty lock file"))
	}
	err = json.Unmarshal([]byte(strings.TrimSpace(string(b[:n]))), &info)
	return info, err
}
