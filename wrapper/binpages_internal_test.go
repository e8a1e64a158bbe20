//go:build linux

package wrapper

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// binaryRSS is how much of this process's own binary is mapped resident
// (its read-only mappings), in kB.
func binaryRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	kb, ours := 0, false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			ours = strings.Join(f[5:], " ") == exe && f[1][1] != 'w'
		}
		if len(f) == 3 && f[0] == "Rss:" && ours {
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb
}

// TestUnmapBinaryPages: unmapBinaryPages leaves at most half of the
// binary's pages that the process had mapped (a test binary that has run
// has most of them), and the process goes on running code and reading
// constant data, mapped back from the page cache.
func TestUnmapBinaryPages(t *testing.T) {
	before := binaryRSS(t)
	if before < 2048 {
		t.Fatalf("only %d kB of the test binary are resident before; the test needs a few MB", before)
	}
	unmapBinaryPages()
	after := binaryRSS(t)
	t.Logf("the binary's resident pages: %d kB before, %d kB after", before, after)
	if after*2 > before {
		t.Errorf("%d kB of the binary still resident after unmapBinaryPages, of %d kB before; want at most half", after, before)
	}
	b, err := json.Marshal(map[string]any{"still": "running", "n": 42})
	if err != nil || string(b) != `{"n":42,"still":"running"}` {
		t.Errorf("after unmapBinaryPages: %s, %v", b, err)
	}
}

// TestLandedUnmapsTheBinaryPagesAfterEachBeat: in a wrapper's own
// process, once the wait has begun, every beat leaves at most half of the
// binary's pages it found resident (what the beat and a collection
// brought back); before the wait has begun a beat leaves them.
func TestLandedUnmapsTheBinaryPagesAfterEachBeat(t *testing.T) {
	defer ownProcess.Store(ownProcess.Load())
	ownProcess.Store(true)
	// touch maps back every page of the binary's read-only mappings (as
	// a beat and a collection map back those they touch), reading one
	// byte of each through /proc/self/mem, which faults it in.
	touch := func() int {
		t.Helper()
		binMappings.once.Do(func() { binMappings.m = readBinaryMappings() })
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Close()
		b := make([]byte, 1)
		for _, m := range binMappings.m {
			for a := m.start; a < m.end; a += 4096 {
				if _, err := mem.ReadAt(b, int64(a)); err != nil {
					t.Fatalf("reading the binary's page at %#x: %v", a, err)
				}
			}
		}
		return binaryRSS(t)
	}
	var w waitMem
	unmapBinaryPages()
	before := touch()
	w.landed(time.Now())
	if after := binaryRSS(t); after*2 < before {
		t.Errorf("a beat before the wait began left %d kB of the binary's %d kB resident; want them left", after, before)
	}
	w.begin()
	for beat := 1; beat <= 3; beat++ {
		before := touch()
		if before < 4096 {
			t.Fatalf("beat %d: only %d kB of the binary resident before it; the test needs more", beat, before)
		}
		w.landed(time.Now())
		after := binaryRSS(t)
		t.Logf("beat %d: the binary's resident pages %d kB before, %d kB after", beat, before, after)
		if after*2 > before {
			t.Errorf("beat %d: %d kB of the binary still resident after it, of %d kB before; want at most half", beat, after, before)
		}
	}
}
