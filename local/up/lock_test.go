//go:build unix

package up

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLock: one holder at a time; a reader sees it and what it says; a
// file left behind by a server that is gone does not count.
func TestLock(t *testing.T) {
	store := filepath.Join(t.TempDir(), "state.db")
	if _, ok := Running(store); ok {
		t.Fatal("Running with no lock file")
	}
	// A file a killed server left: it names a pid, and nobody holds it.
	if err := os.WriteFile(LockFile(store), []byte(`{"pid": 1, "web": "http://127.0.0.1:1/"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := Running(store); ok {
		t.Error("Running for a lock file nobody holds")
	}
	info := Info{PID: os.Getpid(), Web: "http://127.0.0.1:8080/", Started: time.Now().UTC().Truncate(time.Second)}
	l, err := Acquire(store, info)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := Running(store); !ok || got != info {
		t.Errorf("Running: %+v %v, want %+v", got, ok, info)
	}
	_, err = Acquire(store, Info{PID: 2})
	var re *RunningError
	if !errors.As(err, &re) || re.Info.PID != info.PID || !strings.Contains(err.Error(), "whimbrel up already serves "+store+" (pid ") {
		t.Errorf("a second Acquire: %v", err)
	}
	l.Release()
	if _, ok := Running(store); ok {
		t.Error("Running after Release")
	}
	l, err = Acquire(store, info)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}
