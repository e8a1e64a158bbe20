//go:build linux

package wrapper

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
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
