package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/whimbrel/whimbrel/launcher"
	"github.com/whimbrel/whimbrel/launcher/local"
	"github.com/whimbrel/whimbrel/state"
	"github.com/whimbrel/whimbrel/state/sqlite"
)

// TestQuitStartsNothingAfter: once Quit has killed what ran, a launch
// that comes after it (a finally activity readied by the kill, a pass
// still going) starts no command, under either supervision: an activity
// the run would have claimed from READY is left READY (ErrNotClaimed), and
// one the launcher claimed is refused, for the launcher to fail.
func TestQuitStartsNothingAfter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "state.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	marker := filepath.Join(dir, "started")
	command := []string{"sh", "-c", "touch " + marker}
	for _, tc := range []struct {
		name      string
		supervise string
		fromReady bool
	}{
		{"inline, from READY", local.SuperviseInline, true},
		{"inline, claimed by the launcher", local.SuperviseInline, false},
		{"process", local.SuperviseProcess, false},
	} {
		lb := &local.Backend{Wrapper: "/bin/true", LogDir: dir, Supervise: tc.supervise, Store: st,
			Env: []string{"PATH=" + os.Getenv("PATH")}}
		if !lb.Quit(10 * time.Second) {
			t.Fatalf("%s: Quit with nothing running did not return at once", tc.name)
		}
		_, err := lb.Launch(context.Background(), launcher.Job{
			Key:       state.ActivityKey{ActivityExecID: "a::" + tc.supervise, WorkflowExecID: "w::quit"},
			Command:   command,
			FromReady: tc.fromReady,
		})
		if err == nil {
			t.Fatalf("%s: a launch after Quit was made", tc.name)
		}
		if got := errors.Is(err, launcher.ErrNotClaimed); got != tc.fromReady {
			t.Errorf("%s: errors.Is(%v, ErrNotClaimed) = %v, want %v", tc.name, err, got, tc.fromReady)
		}
		lb.Wait()
	}
	time.Sleep(200 * time.Millisecond) // a command that started would have touched it
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a command started after Quit")
	}
}
